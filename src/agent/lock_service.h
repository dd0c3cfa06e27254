#pragma once
// LockService: what the agent does with a request line. Decodes it (protocol/), refuses what a
// client limit or an access rule forbids, and runs the op's handler against the LockEngine; the
// reply goes back through the transport (Server). A session's state is its ClientSession
// (core/client_session.h): this service opens and erases a connection's, counts its requests
// in flight and detached acquires in it; the engine and elections keep their parts of it
// there too. Loop thread only.
//
// The op table: protocol/messages.h lists every op once, as the alternatives of the Op variant
// (each request type carries its wire name and fields; the decoder's table derives from it);
// here each request type has one Handle specialization, which std::visit instantiates, so a
// missing one fails the build. A new op is a request type and its decoder in protocol/, a
// Handle specialization in lock_service.cc, and their tests.

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "agent/detached_leases.h"
#include "agent/handover_state.h"
#include "agent/request_stats.h"
#include "agent/server.h"
#include "core/access.h"
#include "core/client_session.h"
#include "core/lock_view.h"
#include "core/result.h"
#include "locking/lock_engine.h"
#include "protocol/messages.h"

namespace lw {

class Elections;

struct ServiceOptions {
  protocol::Limits limits;  // what the decoder accepts
  size_t max_inflight = 0;  // unanswered requests of one session (0: no bound)
  size_t max_locks = 0;     // locks one session holds or awaits (0: no bound)
  AccessPolicy access;      // who may lock what (and campaign for which election)
  // Not owned; null: leader, observe and unobserve fail with internal. Campaign and resign
  // need it too (a campaign's payload).
  Elections* elections = nullptr;
  // The `upgrade` op of an allowed peer: the agent starts handing over (agent/upgrade.h) and
  // answers `id` on the session itself, or through the next process. Null: refused.
  std::function<void(SessionId session, const nlohmann::json& id)> upgrade;
  // The admin API's URL as reachable from this host, for `health` ("": admin_listen is off).
  // Null: health leaves it out.
  std::function<std::string()> admin_url;
};

class LockService final : public SessionHandler {
 public:
  // transport, sessions, engine and stats: not owned, must outlive the service. The engine
  // keeps its books in the same sessions (EngineOptions::sessions).
  LockService(SessionWriter& transport, SessionTable& sessions, LockEngine& engine,
              ServiceOptions options, RequestStats& stats);

  // SessionHandler
  void Opened(SessionId session, const Peer& peer, const std::vector<gid_t>& groups) override;
  void Line(SessionId session, std::string_view line) override;
  void Closed(SessionId session) override;
  bool Idle(SessionId session) const override;
  bool Answered(SessionId session) const override;

  // Pushes a `lost` event to the session, if it is still connected; a detached lease's session
  // has no connection: the lease is forgotten.
  void NotifyLost(SessionId session, const std::string& resource, const std::string& token,
                  std::string_view reason);
  // Who is at the other end of a session; pid -1 once it is gone (a lease session: its uid).
  Peer PeerOf(SessionId session) const;
  // "pid 4242 (python3 worker.py)", "session 7 (closed)" or "a detached lease of uid 1000":
  // for events and logs.
  std::string Describe(SessionId session) const;
  // Every lock held through the engine with its holder (a detached lease's: its creator),
  // longest-held first.
  std::vector<LockView> Locks() const;
  // The `limit` of them an operator looks at first, stuck first (ResourceTable::ListedLocks),
  // with their holders; with `grants`, {key, value} of each (never shown).
  std::vector<LockView> ListedLocks(size_t limit,
                                    ResourceTable::GrantPairs* grants = nullptr) const;
  // The `limit` longest-waiting acquires (LockEngine::AllWaiters), each with its session's peer.
  std::vector<WaiterView> Waiters(size_t limit) const;

  // ---- an in-place upgrade (agent/service_handover.cc, agent/upgrade.h)
  // Every request in flight is an acquire or campaign that waits (the engine dropped those
  // with DropWaiters): nothing is answered any more until they are asked again.
  // `upgrading`: the session whose upgrade request is answered through the next process (its
  // request stays in flight).
  bool Settled(SessionId upgrading) const;
  // Lets go of what acquires of several resources still under way were granted so far, and
  // forgets them: each is asked again whole (its line is one of the asks handed over). Called
  // before the engine drops its waiters for an upgrade.
  void DropPartialAcquires();
  // The state to hand over: each handed connection's holds, waiting asks (taken from it: they
  // are asked again by whichever process serves next) and observations; the detached leases.
  // fds: each connection's descriptor, indexed by SessionState::fd (the listener's is not in it).
  // ids: the session of each captured connection, in state.sessions' order.
  // What a pre-copy sent (the holds' serials), and the holds touched since (LockEngine::
  // TrackChanges), by serial with their resource's name.
  struct Copied {
    std::unordered_set<uint64_t> serials;
    std::unordered_map<uint64_t, std::string> touched;
  };
  // copied: after a pre-copy (format 3), only what changed since goes (LockEngine::
  // ChangesSince), and each session keeps its id. Null: every hold in full.
  handover::State Capture(const std::vector<Server::Handed>& handed, std::vector<int>& fds,
                          std::vector<SessionId>& ids, const Copied* copied = nullptr);
  // Every session's waiting asks, taken from it (oldest first): an upgrade that failed after
  // the engine dropped its waiters asks them again with AskAgain.
  std::vector<std::pair<SessionId, handover::PendingAsk>> TakeAsks();
  // A handed connection, served here as session sid: its holds taken over, its observations
  // followed again (their first reading not sent: the client had its reply). Holds that
  // cannot be taken are told `lost`. Its asks are the caller's to ask again (AskAgain), in
  // age order across every session.
  void Restore(SessionId sid, const handover::SessionState& state);
  void RestoreLeases(const std::vector<handover::LeaseState>& leases);
  // The upgrade request `id` of the session answered (a line, or its failure).
  void AnswerUpgrade(SessionId sid, const nlohmann::json& id,
                     const std::variant<std::string, Failure>& answer);
  // Asks again, on session sid, requests taken by Capture or TakeAsks.
  // In the order given (TakeAsks: oldest first, whichever session); a closed session's are
  // dropped.
  void AskAgain(const std::vector<std::pair<SessionId, handover::PendingAsk>>& asks);

  // ---- a pre-copied upgrade (docs/upgrade.md, "Pre-copy"; agent/service_precopy.cc)
  // The old process: every session that holds something (lease sessions included), to copy.
  std::vector<SessionId> SessionsToCopy() const;
  // The next process: what the pre-copy entered, by the serial the old process gave each hold.
  struct Staged {
    struct Entry {
      std::string name;
      const Holder* hold = nullptr;  // here (LockEngine::Stage)
    };
    std::unordered_map<uint64_t, Entry> holds;
    // Refused at the pre-copy (a resource of another kind here then): kept whole, taken over
    // at the hand-over if an update names it.
    std::unordered_map<uint64_t, std::pair<SessionId, HandedHold>> refused;
    std::unordered_set<SessionId> sessions;
    size_t slices = 0;
  };
  void Stage(const handover::PreCopy& slice, Staged& staged);
  // A session's pre-copied holds as they are at the hand-over; those refused at the pre-copy
  // go to `late`, in full, for Restore.
  void UpdateStaged(const std::vector<HoldUpdate>& kept, Staged& staged,
                    std::vector<HandedHold>& late);
  // The pre-copied holds that ended since (`gone`: released or lost in the old process) are
  // dropped, with the sessions that no connection came back for (`adopted`: those that did).
  void DropStale(Staged& staged, const std::vector<uint64_t>& gone,
                 const std::unordered_set<SessionId>& adopted);

 private:
  using Id = nlohmann::json;

  std::optional<Failure> Refusal(ClientSession& s, const protocol::Request& request);
  // The session's waiting asks, taken from it (its in-flight and detaching counts with them).
  std::vector<handover::PendingAsk> TakeAsks(ClientSession& s);
  // The acquire or campaign `id` of the session was answered.
  void Asked(SessionId sid, const Id& id);
  // Answers one request of the session (it is no longer in flight).
  void Answer(SessionId sid, std::string line);
  void Fail(SessionId sid, const Id& id, std::string_view op, const Failure& failure);

  // The op table: one explicit specialization per request type, in lock_service.cc. A new op
  // adds its specialization there and nothing here.
  template <class Request>
  void Handle(SessionId sid, const Id& id, const Request& op);

  // ---- several resources at once (agent/service_multi.cc)
  struct MultiAcquire;
  // An acquire of op.resources: each in turn, in their (canonical) order, through the engine,
  // within one wait; answered with every grant, or with the first failure after letting go of
  // the grants so far.
  void AcquireAll(SessionId sid, const Id& id, const protocol::AcquireRequest& op);
  void NextOfAll(const std::shared_ptr<MultiAcquire>& m);
  void LetGoOfAll(MultiAcquire& m);
  void ForgetMulti(const std::shared_ptr<MultiAcquire>& m);

  // ---- detached leases (agent/detached_ops.cc)
  // A detached acquire refused by its uid's limit (counted), or nullopt. Constant time: the
  // uid's lease session counts its leases and its unanswered detached acquires.
  std::optional<Failure> LeaseLimit(const ClientSession& s);
  // The lease session of uid (core/session_id.h), opened on first use.
  ClientSession& LeaseSession(uid_t uid);
  // n of uid's detached acquires were answered or dropped.
  void Undetaching(uid_t uid, size_t n);
  // A detached acquire of the session was answered: its creator is recorded when granted.
  void LeaseAnswered(SessionId sid, const std::string& resource,
                     const std::variant<Grant, Failure>& result);
  // Who holds (resource, token) for a release or extend (op) by the session: a detached
  // lease's session when it names one the session may manage (else its refusal), otherwise
  // the session itself (the engine answers not_held when it holds no such lock).
  std::variant<SessionId, Failure> OwnerFor(SessionId sid, const std::string& resource,
                                            const std::string& token, std::string_view op);
  void FillHolder(LockView& lock) const;
  // The release of (resource, token) held by `holder` (sid itself, or a lease session), answered
  // to sid.
  void ReleaseFor(SessionId sid, const Id& id, SessionId holder, const std::string& resource,
                  const std::string& token);
  // A release or extend by the session of a token that neither it nor a lease this run knows
  // holds: a detached lease of the agent's earlier run (the same agent id) is adopted under the
  // session's uid's lease session, confirmed on a quorum by ttl_ms like an extend (the token is
  // the proof; the access rules for the resource apply). `then` gets the adopted lease's grant,
  // or the failure to answer (not_held as before when nothing is adopted).
  void AdoptLease(SessionId sid, const std::string& resource, const std::string& token,
                  int64_t ttl_ms, std::string_view op,
                  std::function<void(const std::variant<Grant, Failure>&)> then);
  // Whether the session itself holds (resource, token) through the engine.
  bool HoldsItself(SessionId sid, const std::string& resource, const std::string& token) const;

  SessionWriter& transport_;
  SessionTable& sessions_;
  LockEngine& engine_;
  ServiceOptions options_;
  RequestStats& stats_;
  DetachedLeases leases_;
  // Acquires of several resources under way, by session.
  std::unordered_map<SessionId, std::vector<std::shared_ptr<MultiAcquire>>> multis_;
};

// The election ops' handlers live in agent/election_ops.cc.
template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::CampaignRequest& op);
template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::ResignRequest& op);
template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::LeaderRequest& op);
template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::ObserveRequest& op);
template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::UnobserveRequest& op);

}  // namespace lw
