#include "locking/renewer.h"

#include "core/redlock_math.h"

namespace lw {

void Renewer::Due(const std::string& name, const std::string& token) {
  Holder* h = holds_.FindHolder(name, token);
  if (h == nullptr) return;
  const auto now = Holder::Clock::now();
  if (now >= h->valid_until) {
    holds_.Lose(name, token, h->renew ? LossReason::kRenewFailed : LossReason::kExpired);
    return;
  }
  if (!h->renew || h->renewing) {
    holds_.ScheduleHolder(name, *h, CeilMs(h->valid_until - now));
    return;
  }
  if (slots_.MustWait()) {
    // The loss is still reported on time if its turn comes too late.
    const bool room = slots_.Wait(name, h->serial);
    holds_.ScheduleHolder(name, *h, CeilMs(h->valid_until - now));
    if (room) holds_.Defer([this] { Drain(); });
    return;
  }
  Renew(name, *h, now);
}

void Renewer::Drain() {
  slots_.Drain([this](const std::string& name, uint64_t serial) {
    const Holder* h = holds_.HolderWithSerial(name, serial);
    if (h == nullptr || h->renewing) return;
    Due(name, h->token.str());  // renews now, or reports the loss
  });
}

void Renewer::Renew(const std::string& name, Holder& h, Holder::Clock::time_point now) {
  slots_.Started();
  h.renewing = true;
  const int64_t left_ms = CeilMs(h.valid_until - now);
  const int64_t timeout_ms = RenewRoundTimeoutMs(left_ms, options_.node_timeout_ms);
  // The round ends (and reschedules) before the validity does, unless the node timeout alone
  // outlasts it: only then is a separate deadline needed to report the loss on time.
  if (timeout_ms >= left_ms) holds_.ScheduleHolder(name, h, left_ms);
  const std::string token = h.token.str();
  holds_.RunExtend(
      name, token, h.ttl_ms,
      [this, name, token](const std::variant<Extension, Failure>& result) {
        Renewed(name, token, result);
      },
      timeout_ms);
}

void Renewer::Renewed(const std::string& name, const std::string& token,
                      const std::variant<Extension, Failure>& result) {
  if (slots_.Ended()) holds_.Defer([this] { Drain(); });
  Holder* h = holds_.FindHolder(name, token);
  if (h == nullptr) return;
  h->renewing = false;
  const auto* f = std::get_if<Failure>(&result);
  if (f == nullptr) {  // extended; RunExtend scheduled the next renewal
    stats_.renewals[RenewOutcome::kExtended].Inc();
    return;
  }
  if (f->code == ErrorCode::kNotHeld) {
    stats_.renewals[RenewOutcome::kLost].Inc();
    holds_.Lose(name, token, LossReason::kRenewFailed);
    return;
  }
  stats_.renewals[RenewOutcome::kRetry].Inc();
  slots_.WarnFailed(name, f->message);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  holds_.ScheduleHolder(
      name, *h,
      RenewRetryDelayMs(CeilMs(h->valid_until - Holder::Clock::now()), options_.retry_delay_ms,
                        options_.retry_jitter_ms, unit(rng_)));
}

}  // namespace lw
