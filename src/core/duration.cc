#include "core/duration.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace lw {

std::variant<int64_t, std::string> ParseDurationMs(std::string_view text) {
  const std::string quoted = "\"" + std::string(text) + "\"";
  size_t split = 0;
  while (split < text.size() &&
         ((text[split] >= '0' && text[split] <= '9') || text[split] == '.')) {
    ++split;
  }
  if (split == 0) return "duration " + quoted + " must start with a number, e.g. 30s or 250ms";
  const std::string_view number = text.substr(0, split);
  const std::string_view unit = text.substr(split);
  double scale;
  if (unit == "ms") {
    scale = 1;
  } else if (unit == "s") {
    scale = 1000;
  } else if (unit == "m") {
    scale = 60'000;
  } else if (unit == "h") {
    scale = 3'600'000;
  } else if (unit.empty()) {
    return "duration " + quoted + " needs a unit: ms, s, m or h (e.g. 30s)";
  } else {
    return "duration " + quoted + " has unknown unit \"" + std::string(unit) +
           "\"; use ms, s, m or h";
  }
  double value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size()) {
    return "duration " + quoted + " is not a number followed by a unit";
  }
  const double ms = value * scale;
  if (!std::isfinite(ms) || ms > 1e15) return "duration " + quoted + " is too large";
  return static_cast<int64_t>(std::llround(ms));
}

std::string FormatDurationMs(int64_t ms) {
  if (ms < 0) return "-" + FormatDurationMs(ms == INT64_MIN ? INT64_MAX : -ms);
  char out[32];
  if (ms < 1000) {
    std::snprintf(out, sizeof out, "%lldms", static_cast<long long>(ms));
  } else if (ms < 60'000) {
    std::snprintf(out, sizeof out, "%.1fs", static_cast<double>(ms / 100) / 10.0);
  } else if (ms < 3'600'000) {
    std::snprintf(out, sizeof out, "%lldm%02llds", static_cast<long long>(ms / 60'000),
                  static_cast<long long>(ms / 1000 % 60));
  } else if (ms < 86'400'000) {
    std::snprintf(out, sizeof out, "%lldh%02lldm", static_cast<long long>(ms / 3'600'000),
                  static_cast<long long>(ms / 60'000 % 60));
  } else {
    std::snprintf(out, sizeof out, "%lldd%02lldh", static_cast<long long>(ms / 86'400'000),
                  static_cast<long long>(ms / 3'600'000 % 24));
  }
  return out;
}

std::string FormatDurationMsUp(int64_t ms) {
  if (ms <= 0) return FormatDurationMs(ms);
  // The last unit FormatDurationMs shows at this size.
  const int64_t unit = ms < 1000 ? 1 : ms < 60'000 ? 100 : ms < 3'600'000 ? 1000
                     : ms < 86'400'000 ? 60'000 : 3'600'000;
  const int64_t up = ms > INT64_MAX - unit ? ms : (ms + unit - 1) / unit * unit;
  return FormatDurationMs(up);
}

}  // namespace lw
