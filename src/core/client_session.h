#pragma once
// ClientSession: one client of this agent as every part of it sees the client (the connection
// context of Redis's `struct client`): who it is, what its limits have counted, what it holds
// and awaits, what it observes. The transport, the service, the engine and elections all reach
// the one object through the SessionTable instead of keeping maps of their own, so a session's
// state is in one place (and one place to serialize). A connection's session lives from its
// accept to its close (LockService::Opened .. Closed); a uid's lease session (core/session_id.h)
// from its first detached acquire for the life of the agent, since its leases outlive every
// connection. Plain data: loop thread only.

#include <chrono>
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/access.h"
#include "core/lock_view.h"
#include "core/session_id.h"

namespace lw {

// What a session holds and awaits, by resource name: kept by the engine's books
// (locking/resource_table.h) so that closing the session finds its locks without a scan.
struct SessionLocks {
  // Names of the locks it holds, unordered, one per hold. A vector, not a set: at 100k held
  // locks a set node per lock is ~5 MiB more; removal scans one session's list (at most
  // max_locks_per_session names).
  std::vector<std::string> held;
  std::map<std::string, int> waiting;  // resource -> number of queued requests

  void Forget(const std::string& name);   // one of its waiters for `name` is gone
  void Dropped(const std::string& name);  // it no longer holds `name`
  // Locks held plus acquires queued: what it could hold at once (max_locks_per_session).
  size_t commitments() const;
  bool empty() const { return held.empty() && waiting.empty(); }
};

struct ClientSession {
  SessionId id = 0;
  // Who is at the other end (SO_PEERCRED at accept); a lease session's: only its uid.
  Peer peer;
  PeerIds ids;
  // ---- the service's (agent/lock_service.h)
  size_t inflight = 0;         // requests read but not yet answered
  bool denied_logged = false;  // an access refusal was logged for this session already
  // A connection's: its detached acquires not yet answered. A lease session's: all of its
  // uid's (what the uid's lease limit counts besides its leases).
  size_t detaching = 0;
  // Its acquires and campaigns read but not answered, as the client sent them (id: the
  // request's id as JSON): what an in-place upgrade asks again in the next process.
  struct Ask {
    std::string id;
    std::string line;
    std::chrono::steady_clock::time_point received;
  };
  std::vector<Ask> asks;
  // ---- the engine's
  SessionLocks locks;
  // ---- elections' (agent/elections.h): the names it observes
  std::set<std::string> observed;

  bool lease() const { return IsLeaseSession(id); }
  // Nothing keeps it open: no request unanswered, no lock held or awaited, nothing observed.
  // The idle sweep closes only such a connection, however quiet it is.
  bool idle() const { return inflight == 0 && locks.empty() && observed.empty(); }
};

class SessionTable {
 public:
  // The session `id`, created (with only its id) when it does not exist yet. References stay
  // valid until the session is erased.
  ClientSession& Open(SessionId id);
  ClientSession* Find(SessionId id);
  const ClientSession* Find(SessionId id) const;
  void Erase(SessionId id) { sessions_.erase(id); }
  size_t size() const { return sessions_.size(); }
  template <class Visit>  // visit(ClientSession&) for every session
  void ForEach(Visit&& visit) {
    for (auto& [id, s] : sessions_) visit(s);
  }
  template <class Visit>  // visit(const ClientSession&) for every session
  void ForEach(Visit&& visit) const {
    for (const auto& [id, s] : sessions_) visit(s);
  }

 private:
  std::unordered_map<SessionId, ClientSession> sessions_;
};

}  // namespace lw
