#include "agent/detached_leases.h"

#include "core/quote.h"

namespace lw {

Peer LeasePeer(uid_t uid) { return Peer{-1, static_cast<int>(uid), -1, ""}; }

void DetachedLeases::Add(DetachedLease lease) {
  by_token_[{lease.resource, lease.token}] = lease.hold;
  const uint64_t hold = lease.hold;
  by_hold_.insert_or_assign(hold, std::move(lease));
}

const DetachedLease* DetachedLeases::Find(const std::string& resource,
                                          const std::string& token) const {
  auto it = by_token_.find({resource, token});
  return it == by_token_.end() ? nullptr : OfHold(it->second);
}

const DetachedLease* DetachedLeases::OfHold(uint64_t hold) const {
  auto it = by_hold_.find(hold);
  return it == by_hold_.end() ? nullptr : &it->second;
}

void DetachedLeases::Drop(const std::string& resource, const std::string& token) {
  auto it = by_token_.find({resource, token});
  if (it == by_token_.end()) return;
  by_hold_.erase(it->second);
  by_token_.erase(it);
}

std::optional<Failure> LeaseRefusal(const PeerIds& requester, const DetachedLease& lease,
                                    const AccessPolicy& access, std::string_view op) {
  if (lease.creator.uid >= 0 && requester.uid == static_cast<uid_t>(lease.creator.uid)) {
    return std::nullopt;
  }
  if (access.AllowsLeases(requester, lease.resource)) return std::nullopt;
  const std::string who = requester.uid == static_cast<uid_t>(-1)
                              ? std::string("a peer of unknown uid")
                              : "uid " + std::to_string(requester.uid);
  return Failure{ErrorCode::kForbidden,
                 who + " may not " + std::string(op) + " the detached lease on " +
                     QuoteClientText(lease.resource, 256) + ": it was created by uid " +
                     std::to_string(lease.creator.uid) + ". Only its creator's uid may " +
                     std::string(op) + " it, or a peer that an access rule ending in +leases "
                     "allows on that resource"};
}

std::optional<Failure> LeaseLimitRefusal(uid_t uid, size_t held, size_t awaited,
                                         size_t max_locks) {
  if (max_locks == 0 || held + awaited < max_locks) return std::nullopt;
  return Failure{ErrorCode::kTooMany,
                 "uid " + std::to_string(uid) + " holds " + std::to_string(held) +
                     " detached lease(s) and awaits " + std::to_string(awaited) +
                     " more: one uid's detached leases are bounded like one connection's locks "
                     "(max_locks_per_session = " + std::to_string(max_locks) +
                     "); release some first"};
}

std::string DescribeLease(const DetachedLease& lease) {
  std::string who = "detached lease of uid " + std::to_string(lease.creator.uid) +
                    ", created by pid " + std::to_string(lease.creator.pid);
  if (!lease.creator.cmdline.empty()) {
    who += " (" + std::string(ShortenUtf8(lease.creator.cmdline, 80)) + ")";
  }
  return who;
}

}  // namespace lw
