#pragma once
// "Did you mean ...?" for a mistyped name (a setting, a subcommand). Pure.

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace lw {

// The name in `names` closest to `wrong`: one that begins with it or that it begins with (at
// least 3 characters of it) counts as 1 apart, any other as its edit distance (Levenshtein).
// The first of the closest, if at most max_distance apart; nullopt when none is that close.
std::optional<std::string_view> ClosestName(std::string_view wrong,
                                            const std::vector<std::string_view>& names,
                                            size_t max_distance);

}  // namespace lw
