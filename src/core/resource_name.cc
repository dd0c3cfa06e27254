#include "core/resource_name.h"

#include <cstdint>

namespace lw {
namespace {

// Returns the length of the UTF-8 sequence at s[i] and its code point, or 0 if invalid.
size_t DecodeUtf8(std::string_view s, size_t i, uint32_t* cp) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t len;
  uint32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, *cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, *cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, *cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<uint8_t>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (b & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

std::optional<std::string> ResourceNameProblem(std::string_view name) {
  return TextProblem(name, kMaxResourceBytes, "resource name");
}

std::optional<std::string> TextProblem(std::string_view text, size_t max_bytes,
                                       std::string_view what) {
  const std::string w(what);
  if (text.empty()) return w + " is empty";
  if (text.size() > max_bytes) {
    return w + " is " + std::to_string(text.size()) + " bytes; the limit is " +
           std::to_string(max_bytes);
  }
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = DecodeUtf8(text, i, &cp);
    if (len == 0) return w + " is not valid UTF-8 (byte " + std::to_string(i) + ")";
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
      return w + " contains a control character at byte " + std::to_string(i);
    }
    i += len;
  }
  return std::nullopt;
}

}  // namespace lw
