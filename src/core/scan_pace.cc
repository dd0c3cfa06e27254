#include "core/scan_pace.h"

namespace lw {

std::string PrefixPattern(std::string_view prefix) {
  std::string pattern;
  for (char c : prefix) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') pattern += '\\';
    pattern += c;
  }
  return pattern + "*";
}

std::chrono::microseconds PaceDelay(uint64_t keys_done, std::chrono::microseconds elapsed,
                                    int64_t keys_per_second) {
  if (keys_per_second <= 0) return std::chrono::microseconds(0);
  const auto due = std::chrono::microseconds(
      static_cast<int64_t>(static_cast<double>(keys_done) * 1e6 /
                           static_cast<double>(keys_per_second)));
  return due > elapsed ? due - elapsed : std::chrono::microseconds(0);
}

}  // namespace lw
