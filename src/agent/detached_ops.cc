// LockService and detached leases (agent/detached_leases.h): their limit, their creators, and
// who may release or extend them.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "agent/lock_service.h"
#include "core/quote.h"
#include "core/unix_time.h"

namespace lw {

ClientSession& LockService::LeaseSession(uid_t uid) {
  ClientSession& lease = sessions_.Open(LeaseSessionOf(uid));
  lease.peer = LeasePeer(uid);
  lease.ids.uid = uid;
  return lease;
}

std::optional<Failure> LockService::LeaseLimit(const ClientSession& s) {
  const ClientSession* lease = sessions_.Find(LeaseSessionOf(s.ids.uid));
  const size_t held = lease == nullptr ? 0 : lease->locks.commitments();
  const size_t awaited = lease == nullptr ? 0 : lease->detaching;
  auto refusal = LeaseLimitRefusal(s.ids.uid, held, awaited, options_.max_locks);
  if (refusal) stats_.limit_refusals[Limit::kDetachedPerUid].Inc();
  return refusal;
}

void LockService::Undetaching(uid_t uid, size_t n) {
  ClientSession* lease = sessions_.Find(LeaseSessionOf(uid));
  if (lease != nullptr) lease->detaching -= std::min(lease->detaching, n);
}

void LockService::LeaseAnswered(SessionId sid, const std::string& resource,
                                const std::variant<Grant, Failure>& result) {
  ClientSession* found = sessions_.Find(sid);
  if (found == nullptr) return;  // answered at shutdown after its connection closed
  ClientSession& s = *found;
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
  ClientSession& s = *sessions_.Find(sid);  // Line found it
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

bool LockService::HoldsItself(SessionId sid, const std::string& resource,
                              const std::string& token) const {
  const Holder* h = engine_.books().FindHolder(resource, token);
  return h != nullptr && h->session == sid;
}

void LockService::AdoptLease(SessionId sid, const std::string& resource, const std::string& token,
                             int64_t ttl_ms, std::string_view op,
                             std::function<void(const std::variant<Grant, Failure>&)> then) {
  const ClientSession& s = *sessions_.Find(sid);  // Line found it
  const Failure not_held{ErrorCode::kNotHeld,
                         "this connection does not hold " + QuoteClientText(resource) +
                             " with that token, nor does any agent's detached lease on it "
                             "(released, expired, or never granted; a read hold's or a "
                             "permit's lease is ended or extended only through the agent that "
                             "granted it)"};
  if (engine_.books().FindHolder(resource, token) != nullptr ||
      !options_.access.Allows(s.ids, resource)) {
    then(not_held);
    return;
  }
  const uid_t uid = s.ids.uid;
  LeaseSession(uid);
  LockEngine::ResumeAsk ask;
  ask.resource = resource;
  ask.token = token;
  ask.ttl_ms = ttl_ms;
  ask.confirm_first = true;  // a release or extend names no kind: a lock's key is tried
  engine_.Resume(
      LeaseSessionOf(uid), std::move(ask),
      [this, uid, resource, not_held, op = std::string(op),
       then = std::move(then)](const std::variant<Grant, Failure>& result) {
        const auto* g = std::get_if<Grant>(&result);
        if (g == nullptr) {
          const Failure& f = std::get<Failure>(result);
          const bool undecided =
              f.code == ErrorCode::kNoQuorum || f.code == ErrorCode::kShuttingDown;
          then(undecided ? f : not_held);
          return;
        }
        leases_.Add({resource, g->token, g->hold, LeaseSessionOf(uid), LeasePeer(uid)});
        stats_.detached_leases.Set(static_cast<double>(leases_.size()));
        spdlog::info("{} taken over for a {} by uid {} (it was held through another agent, "
                     "or this agent's earlier run)",
                     DescribeLease(*leases_.OfHold(g->hold)), op, uid);
        then(result);
      });
}

void LockService::FillHolder(LockView& lock) const {
  lock.held_since_unix_ms = UnixMsNow() - lock.held_ms;
  lock.detached = IsLeaseSession(lock.session);
  const DetachedLease* lease = lock.detached ? leases_.OfHold(lock.hold) : nullptr;
  lock.holder = lease != nullptr ? lease->creator : PeerOf(lock.session);
}

}  // namespace lw
