#include "locking/renewal.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/redlock_math.h"
#include "locking/failure_text.h"

namespace lw {

int64_t RenewDelayMs(bool renew, int64_t ttl_ms, int64_t validity_ms) {
  return renew ? std::min(ttl_ms / 3, validity_ms) : validity_ms;
}

int64_t AdoptedDelayMs(bool renew, int64_t ttl_ms, int64_t left_ms) {
  return renew ? std::clamp<int64_t>(left_ms - ttl_ms * 2 / 3, 0, left_ms) : left_ms;
}

int64_t RenewRoundTimeoutMs(int64_t left_ms, int64_t node_timeout_ms) {
  return std::clamp<int64_t>(left_ms / 2, node_timeout_ms,
                             std::max<int64_t>(node_timeout_ms, 2000));
}

int64_t RenewRetryDelayMs(int64_t left_ms, int64_t retry_delay_ms, int64_t retry_jitter_ms,
                          double unit_random) {
  const int64_t delay =
      RetryDelayMs(std::max(retry_delay_ms, left_ms / 8), retry_jitter_ms, unit_random);
  return std::clamp<int64_t>(delay, 1, std::max<int64_t>(left_ms, 1));
}

bool RenewalSlots::Wait(std::string name, uint64_t serial) {
  backlog_.emplace_back(std::move(name), serial);
  return in_flight_ < kMaxInFlight;
}

bool RenewalSlots::Ended() {
  --in_flight_;
  return !backlog_.empty();
}

void RenewalSlots::Drain(const Renew& renew) {
  while (in_flight_ < kMaxInFlight && !backlog_.empty()) {
    auto [name, serial] = std::move(backlog_.front());
    backlog_.pop_front();
    draining_ = true;
    renew(name, serial);
    draining_ = false;
  }
}

void RenewalSlots::WarnFailed(const std::string& name, const std::string& why) {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_warning_ < std::chrono::seconds(1)) {
    ++warnings_suppressed_;
    return;
  }
  if (warnings_suppressed_ > 0) {
    spdlog::warn("renewal of {} failed: {} (and {} other renewal failure(s) in the last {} ms)",
                 Quoted(name), why, warnings_suppressed_,
                 std::chrono::ceil<std::chrono::milliseconds>(now - last_warning_).count());
  } else {
    spdlog::warn("renewal of {} failed: {}", Quoted(name), why);
  }
  last_warning_ = now;
  warnings_suppressed_ = 0;
}

}  // namespace lw
