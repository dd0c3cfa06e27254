// LockService and detached leases (agent/detached_leases.h): their limit, their creators, and
// who may release or extend them.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "agent/lock_service.h"
#include "core/quote.h"
#include "core/unix_time.h"

namespace lw {

std::optional<Failure> LockService::LeaseLimit(const SessionState& s) {
  const auto pending = detaching_by_uid_.find(s.ids.uid);
  const size_t awaited = pending == detaching_by_uid_.end() ? 0 : pending->second;
  auto refusal = LeaseLimitRefusal(s.ids.uid, engine_.books().Commitments(LeaseSessionOf(s.ids.uid)),
                                   awaited, options_.max_locks);
  if (refusal) stats_.limit_refusals[Limit::kDetachedPerUid].Inc();
  return refusal;
}

void LockService::Undetaching(uid_t uid, size_t n) {
  auto it = detaching_by_uid_.find(uid);
  if (it == detaching_by_uid_.end() || n == 0) return;
  it->second -= std::min(it->second, n);
  if (it->second == 0) detaching_by_uid_.erase(it);
}

void LockService::LeaseAnswered(SessionId sid, const std::string& resource,
                                const std::variant<Grant, Failure>& result) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return;  // answered at shutdown after its connection closed
  SessionState& s = it->second;
  if (s.detaching > 0) {
    --s.detaching;
    Undetaching(s.ids.uid, 1);
  }
  const auto* g = std::get_if<Grant>(&result);
  if (g == nullptr) return;
  leases_.Add({resource, g->token, g->hold, LeaseSessionOf(s.ids.uid), s.peer});
  stats_.detached_leases.Set(static_cast<double>(leases_.size()));
  spdlog::info("{} granted on {} (ttl ends it unless released or extended by token)",
               DescribeLease(*leases_.OfHold(g->hold)), QuoteClientText(resource));
}

std::variant<SessionId, Failure> LockService::OwnerFor(SessionId sid, const std::string& resource,
                                                       const std::string& token,
                                                       std::string_view op) {
  const DetachedLease* lease = leases_.Find(resource, token);
  if (lease == nullptr) return sid;
  SessionState& s = sessions_.at(sid);  // Line found it
  auto refusal = LeaseRefusal(s.ids, *lease, options_.access, op);
  if (!refusal) return lease->session;
  // One warning per session, as for acquire.
  if (!s.denied_logged) {
    s.denied_logged = true;
    spdlog::warn("refused: pid {} uid {} may not {} the {} on {} (further refusals of session "
                 "{} are logged at debug)",
                 s.peer.pid, s.peer.uid, op, DescribeLease(*lease), QuoteClientText(resource),
                 sid);
  } else {
    spdlog::debug("refused: session {} may not {} a detached lease on {}", sid, op,
                  QuoteClientText(resource));
  }
  return *std::move(refusal);
}

void LockService::FillHolder(LockView& lock) const {
  lock.held_since_unix_ms = UnixMsNow() - lock.held_ms;
  lock.detached = IsLeaseSession(lock.session);
  const DetachedLease* lease = lock.detached ? leases_.OfHold(lock.hold) : nullptr;
  lock.holder = lease != nullptr ? lease->creator : PeerOf(lock.session);
}

}  // namespace lw
