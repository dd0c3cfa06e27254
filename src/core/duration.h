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
// Rounded down to the last unit shown (12.39 s: "12.3s").
std::string FormatDurationMs(int64_t ms);
// The same rounded up to the last unit shown instead (12.31 s: "12.4s"): a part that, printed
// beside FormatDurationMs(whole - part), adds up to a whole that is a multiple of their unit.
std::string FormatDurationMsUp(int64_t ms);

}  // namespace lw
