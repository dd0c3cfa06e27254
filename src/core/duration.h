#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace lw {

// Parses a human duration with a unit: "250ms", "30s", "2m", "1h", "1.5s".
// A bare number is refused (ambiguous). Returns milliseconds, or a human error.
std::variant<int64_t, std::string> ParseDurationMs(std::string_view text);

// A duration for people, two units at most: "850ms", "12.3s", "6m12s", "2h05m", "3d04h".
std::string FormatDurationMs(int64_t ms);

}  // namespace lw
