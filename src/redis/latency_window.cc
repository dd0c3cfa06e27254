#include "redis/latency_window.h"

#include <algorithm>
#include <cmath>

namespace lw {

LatencyWindow::LatencyWindow(size_t capacity) : ms_(std::max<size_t>(capacity, 1)) {}

void LatencyWindow::Add(std::chrono::nanoseconds latency) {
  ms_[next_] = std::chrono::duration<double, std::milli>(latency).count();
  next_ = (next_ + 1) % ms_.size();
  if (size_ < ms_.size()) ++size_;
}

std::optional<double> LatencyWindow::QuantileMs(double q) const {
  if (size_ == 0) return std::nullopt;
  q = std::clamp(q, 0.0, 1.0);
  // Nearest rank, 1-based: ceil(q * n), at least 1. The epsilon keeps 0.99 * 100 at 99
  // whichever way the product rounds.
  const auto n = static_cast<double>(size_);
  size_t rank = static_cast<size_t>(std::ceil(q * n - 1e-9));
  rank = std::clamp<size_t>(rank, 1, size_);
  std::vector<double> copy(ms_.begin(), ms_.begin() + static_cast<std::ptrdiff_t>(size_));
  auto nth = copy.begin() + static_cast<std::ptrdiff_t>(rank - 1);
  std::nth_element(copy.begin(), nth, copy.end());
  return *nth;
}

}  // namespace lw
