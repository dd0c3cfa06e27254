#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace lw {

// Parses a human duration with a unit: "250ms", "30s", "2m", "1h", "1.5s".
// A bare number is refused (ambiguous). Returns milliseconds, or a human error.
std::variant<int64_t, std::string> ParseDurationMs(std::string_view text);

}  // namespace lw
