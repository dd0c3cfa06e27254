#include "core/closest_name.h"

#include <algorithm>

namespace lw {
namespace {

// Names are short, so O(n*m) is fine.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<std::string_view> ClosestName(std::string_view wrong,
                                            const std::vector<std::string_view>& names,
                                            size_t max_distance) {
  std::optional<std::string_view> best;
  size_t best_distance = max_distance + 1;
  for (std::string_view name : names) {
    const bool prefix = wrong.size() >= 3 && (name.starts_with(wrong) || wrong.starts_with(name));
    const size_t distance = prefix ? 1 : EditDistance(wrong, name);
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace lw
