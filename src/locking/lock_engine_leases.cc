// LockEngine: detached leases, named by their token across the fleet (docs/safety.md §9). An
// exclusive lease's key holds "<agent id>:<token>" with the id of whichever agent last took it
// over; any agent takes it over (kTakeLease) before it extends or releases it. So this agent's
// books may still list a lease that another agent has since taken over or released: such a
// stale entry must block nobody and be handed to nobody.

#include <spdlog/spdlog.h>

#include "locking/kinds/kinds.h"
#include "locking/lock_engine.h"

namespace lw {

bool LockEngine::IsFleetLease(const Resource& r, const Holder& h) {
  return h.kept && h.mode == HoldMode::kExclusive && r.shape.kind == LockKind::kMutex;
}

bool LockEngine::OnlyFleetLeasesHeld(const Resource& r) {
  if (r.holders.empty()) return false;
  for (const auto& h : r.holders) {
    if (!IsFleetLease(r, *h)) return false;
  }
  return true;
}

RoundRequest LockEngine::TakeLeaseRound(const std::string& name, const Resource& r,
                                        const Holder& h, int64_t ttl_ms) const {
  return kinds::TakeLease(table_.PlaceOf(name, r, h), h.token.str(), ttl_ms);
}

void LockEngine::DropStaleLeases(Resource& r, const std::string& name, const Holder& granted) {
  std::vector<const Holder*> stale;
  for (const auto& h : r.holders) {
    if (h.get() != &granted && IsFleetLease(r, *h)) stale.push_back(h.get());
  }
  for (const Holder* h : stale) {
    // The grant won a quorum, so a quorum no longer holds the lease's value: it was released or
    // taken over through another agent (or expired there). Nothing is sent: its key is not ours.
    auto gone = TakeHolder(r, name, h);
    spdlog::info("detached lease on {} ended through another agent (a new grant won a quorum)",
                 Quoted(name));
    events_->Lost(gone->session, name, gone->token.str(), "ended_elsewhere");
  }
}

}  // namespace lw
