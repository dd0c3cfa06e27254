#pragma once
// Detached leases (acquire with "detach": true): holds that outlive the connection that took
// them. The engine keeps each one under its uid's lease session (LeaseSessionOf), which no
// connection ever has, so closing the creating connection leaves it held; it ends when released
// by its token, when its ttl runs out, or when an operator revokes it. This agent remembers who
// created each one (DetachedLeases) for the views and for deciding who may release or extend it
// (LeaseRefusal). Lease sessions: core/session_id.h. Pure logic: no I/O, loop thread only.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/access.h"
#include "core/lock_view.h"
#include "core/result.h"
#include "core/session_id.h"

namespace lw {

// Who a lease session (core/session_id.h) is: uid's, with no process.
Peer LeasePeer(uid_t uid);

// One detached lease as it was created.
struct DetachedLease {
  std::string resource;
  std::string token;
  uint64_t hold = 0;      // Grant::hold, LockView::hold
  SessionId session = 0;  // the lease session that holds it: LeaseSessionOf(its creator's uid)
  Peer creator;           // the acquiring connection's peer at the acquire
};

// The creators of the detached leases this agent granted (and the engine still holds), by
// (resource, token) for release and extend, and by hold for the views.
class DetachedLeases {
 public:
  void Add(DetachedLease lease);
  const DetachedLease* Find(const std::string& resource, const std::string& token) const;
  const DetachedLease* OfHold(uint64_t hold) const;
  // Forgets the lease (released, lost, expired or revoked); nothing when it is not known.
  void Drop(const std::string& resource, const std::string& token);
  size_t size() const { return by_hold_.size(); }
  template <class Visit>  // visit(const DetachedLease&) for every lease
  void ForEach(Visit&& visit) const {
    for (const auto& [hold, lease] : by_hold_) visit(lease);
  }

 private:
  std::unordered_map<uint64_t, DetachedLease> by_hold_;
  std::map<std::pair<std::string, std::string>, uint64_t> by_token_;
};

// Why `requester` may not release or extend (op: "release" or "extend") `lease`, or nullopt when
// it may: its creator's uid may, and so may a peer an access rule with +leases allows on the
// lease's resource (AccessPolicy::AllowsLeases). The refusal is `forbidden`.
std::optional<Failure> LeaseRefusal(const PeerIds& requester, const DetachedLease& lease,
                                    const AccessPolicy& access, std::string_view op);

// The refusal of a detached acquire by a uid whose detached leases held and awaited already
// reach max_locks (0: no bound), or nullopt: `too_many`, naming max_locks_per_session.
std::optional<Failure> LeaseLimitRefusal(uid_t uid, size_t held, size_t awaited,
                                         size_t max_locks);

// "detached lease of uid 1000, created by pid 4242 (python3 job.py)": for logs and events.
std::string DescribeLease(const DetachedLease& lease);

}  // namespace lw
