#include "core/quote.h"

#include <cstdint>

namespace lw {
namespace {

// Length of the well-formed UTF-8 sequence starting text[i], or 0 if there is none there.
size_t SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no UTF-16 surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  return n;
}

void AppendEscaped(std::string& out, char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  switch (c) {
    case '"': out += "\\\""; return;
    case '\\': out += "\\\\"; return;
    case '\b': out += "\\b"; return;
    case '\f': out += "\\f"; return;
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    default: break;
  }
  const auto u = static_cast<uint8_t>(c);
  if (u < 0x20) {
    out += "\\u00";
    out += kHex[u >> 4];
    out += kHex[u & 0xF];
  } else {
    out += c;
  }
}

}  // namespace

std::string_view ShortenUtf8(std::string_view text, size_t max) {
  if (text.size() <= max) return text;
  size_t cut = max;
  while (cut > 0 && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut);
}

std::string QuoteClientText(std::string_view text, size_t max_bytes) {
  const std::string_view shown = max_bytes > 0 ? ShortenUtf8(text, max_bytes) : text;
  std::string out;
  out.reserve(shown.size() + 2);
  out += '"';
  for (size_t i = 0; i < shown.size();) {
    const size_t n = SequenceLength(shown, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else if (n == 1) {
      AppendEscaped(out, shown[i++]);
    } else {
      out.append(shown.substr(i, n));
      i += n;
    }
  }
  out += '"';
  if (shown.size() < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace lw
