#include "core/redlock_math.h"

#include <cmath>

namespace lw {

int QuorumSize(int n_masters) { return n_masters / 2 + 1; }

int FenceQuorumSize(int n_masters) {
  const int q = QuorumSize(n_masters);
  const int needed = (2 * n_masters - q + 2) / 2;  // ceil((2N - q + 1) / 2)
  return needed < q ? q : needed;
}

int64_t DriftAllowanceMs(int64_t ttl_ms, double drift_factor) {
  return static_cast<int64_t>(std::ceil(static_cast<double>(ttl_ms) * drift_factor)) + 2;
}

int64_t ValidityMs(int64_t ttl_ms, int64_t elapsed_ms, double drift_factor) {
  return ttl_ms - elapsed_ms - DriftAllowanceMs(ttl_ms, drift_factor);
}

int64_t RetryDelayMs(int64_t base_ms, int64_t jitter_ms, double unit_random) {
  if (unit_random < 0) unit_random = 0;
  if (unit_random >= 1) unit_random = 0.999999;
  return base_ms + static_cast<int64_t>(static_cast<double>(jitter_ms) * unit_random);
}

}  // namespace lw
