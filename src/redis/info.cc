#include "redis/info.h"

#include <charconv>

namespace lw {
namespace {

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

std::optional<int64_t> ParseSeconds(std::string_view s) {
  int64_t value = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, value);
  if (ec != std::errc() || ptr != end || s.empty() || value < 0) return std::nullopt;
  return value;
}

}  // namespace

ServerInfo ParseInfoServer(std::string_view text) {
  ServerInfo out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = TrimRight(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty() || line.front() == '#') continue;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    const std::string_view value = line.substr(colon + 1);
    if (key == "run_id") {
      out.run_id.assign(value);
    } else if (key == "uptime_in_seconds") {
      out.uptime_s = ParseSeconds(value);
    }
  }
  return out;
}

}  // namespace lw
