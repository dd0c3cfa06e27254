#pragma once
// LockEngine: Redlock across N masters, for many local sessions, on one event-loop thread.
//
// - Acquire: waiters for a resource queue FIFO inside this agent; only the head contends on
//   Redis (SET NX PX with a fresh token on all masters at once). A round is granted with a
//   quorum of yes votes and validity = ttl - elapsed - drift > 0; otherwise the token is
//   deleted on every master and the head retries after a jittered delay until wait_ms ends.
// - Release: compare-and-delete everywhere; the next local waiter starts at once (its SET
//   is pipelined behind the DEL on each connection, so no extra round trip is spent).
// - Extend / renew: compare-and-pexpire everywhere; it counts only with a quorum confirmed
//   before the current validity ran out. A renewed lock that cannot be extended before its
//   validity ends is lost: the owner is told (LostHandler) and the lock is forgotten.
// - Fenced acquire (opt-in): phase 1 sets the key and reads the fence counter in one script on
//   each master; with a fence quorum of yes votes, phase 2 writes max(counters) + 1 back, in one
//   script that writes only where the key still holds our token. The grant needs the fence
//   quorum in both phases and validity left after both (docs/safety.md has the argument).
// - Restart quarantine: a master whose Node::votes_count() is false does not count toward
//   acquire or extend quorum (Rounds applies it); it still gets every command.
// - Locks belong to a session; CloseSession releases all of them at once.
//
// Nothing here is thread-safe: every call must come from the loop thread. Callbacks are
// never invoked synchronously from inside the call that takes them, and must not destroy
// the engine.

#include <uv.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/defaults.h"
#include "core/error_code.h"
#include "core/lock_view.h"
#include "core/result.h"
#include "core/session_id.h"
#include "locking/deadline_queue.h"
#include "locking/engine_observer.h"
#include "locking/rounds.h"
#include "redis/node.h"
#include "redis/release_watch.h"
#include "redis/timer.h"

namespace lw {

struct EngineOptions {
  std::string key_prefix = kDefaultKeyPrefix;
  std::string fence_prefix = kDefaultFencePrefix;
  int fence_quorum = 0;  // masters confirming both phases of a fenced grant; 0: FenceQuorumSize
  double drift_factor = kDefaultDriftFactor;
  int64_t node_timeout_ms = kDefaultNodeTimeoutMs;
  int64_t retry_delay_ms = kDefaultRetryDelayMs;
  int64_t retry_jitter_ms = kDefaultRetryJitterMs;
  EngineObserver* observer = nullptr;  // not owned; null: nothing reported
  // Not owned; null: waiters for a key held elsewhere only retry on their timer.
  ReleaseWatch* release_watch = nullptr;
  // Queued acquires of one resource (its contender included) beyond which Acquire fails with
  // too_many; 0: no bound.
  size_t max_waiters_per_resource = 0;
};

struct Grant {
  std::string token;
  int64_t validity_ms;  // as of the decision
  int64_t waited_ms;
  std::optional<int64_t> fence;  // fenced acquires only
  Clock::time_point valid_until;  // validity_ms counts to here: re-check when replying
};
struct Extension {
  int64_t validity_ms;
};

using AcquireDone = std::function<void(const std::variant<Grant, Failure>&)>;
using ExtendDone = std::function<void(const std::variant<Extension, Failure>&)>;
using ReleaseDone = std::function<void(const std::optional<Failure>&)>;
// reason: "renew_failed" or "expired".
using LostHandler = std::function<void(SessionId, const std::string& resource,
                                       const std::string& token, std::string_view reason)>;

class LockEngine {
 public:
  LockEngine(uv_loop_t* loop, std::vector<Node*> nodes, EngineOptions options,
             LostHandler on_lost);
  ~LockEngine();
  LockEngine(const LockEngine&) = delete;
  LockEngine& operator=(const LockEngine&) = delete;

  // Arguments are assumed validated by the protocol layer (name, ttl and wait ranges).
  // fence: also issue a fencing token (Grant::fence).
  void Acquire(SessionId session, const std::string& resource, int64_t ttl_ms, int64_t wait_ms,
               bool renew, AcquireDone done, bool fence = false);
  void Release(SessionId session, const std::string& resource, const std::string& token,
               ReleaseDone done);
  void Extend(SessionId session, const std::string& resource, const std::string& token,
              int64_t ttl_ms, ExtendDone done);
  std::vector<HeldLock> HeldBy(SessionId session) const;
  // Locks the session holds plus acquires it has queued: what it could hold at once.
  size_t Commitments(SessionId session) const;
  // Every lock held through this engine, longest-held first.
  std::vector<LockView> AllLocks() const;
  // {Redis key, token} of every lock held (for the leak scanner; never shown to anyone).
  std::vector<std::pair<std::string, std::string>> HeldGrants() const;

  // The session is gone: release its locks on all masters now and drop its waiters
  // (their callbacks are not called).
  void CloseSession(SessionId session);

  // An operator takes the lock away from its holder: its keys are deleted on every master (with
  // its token), the holder is told `lost` with reason "revoked", and the next local waiter gets
  // its turn. `done` gets the holder's session and how many masters confirmed the delete, or
  // nullopt when nobody holds `resource` through this engine.
  struct Revocation {
    SessionId session;
    int deleted;  // masters that deleted the key (the others had lost it, or did not answer)
  };
  void Revoke(const std::string& resource,
              std::function<void(const std::optional<Revocation>&)> done);

  // Another agent released `key` (heard through ReleaseWatch): a local waiter backing off for
  // it tries again now. Keys this engine has no waiter for are ignored. True if a waiter woke.
  bool ReleasedElsewhere(const std::string& key);

  // Refuse new work, fail waiters with shutting_down, release every lock, and call `done`
  // once every release round has ended (each ends within the node timeout).
  void Shutdown(std::function<void()> done);

  int quorum() const { return rounds_.quorum(); }
  int fence_quorum() const { return fence_quorum_; }
  std::vector<NodeStatus> NodeStatuses() const;
  size_t locks_held() const { return holders_; }
  // Acquire requests queued across all resources (each resource's contender included).
  size_t waiters() const;

 private:
  struct Waiter;
  struct Holder;
  struct Resource;
  struct SessionIndex {
    // Names of the locks it holds, unordered. A vector, not a set: at 100k held locks a set
    // node per lock is ~5 MiB more; removal scans one session's list (at most
    // max_locks_per_session names).
    std::vector<std::string> held;
    std::map<std::string, int> waiting;  // resource -> number of queued requests
  };

  std::string KeyOf(const std::string& name) const;  // the Redis key
  Resource* Find(const std::string& name);
  static std::string LeaseOf(const Holder& h);  // the key's value on the masters
  // Release with a local waiter next in line: it takes over the masters' key as it is, with
  // no round trip, when that is safe and fair to it (see the .cc). False: go through Redis.
  bool LocalHandOff(Resource& r, const std::string& name, const Holder& prev);
  Holder* FindHolder(const std::string& name, const std::string& token);
  void Pump(const std::string& name);
  void StartAttempt(const std::string& name);
  // fence: phase 1 -> the highest counter read; phase 2 -> the fence written.
  void OnAttempt(const std::string& name, uint64_t waiter_id, const std::string& token,
                 const VoteTally& tally, Clock::time_point started, int64_t fence,
                 bool fence_written);
  void WriteFence(const std::string& name, uint64_t waiter_id, const std::string& token,
                  Clock::time_point started, int64_t fence);
  void GrantHead(Resource& r, const std::string& name, const std::string& token,
                 Clock::time_point started, Clock::time_point decided, int64_t validity_ms,
                 std::optional<int64_t> fence);
  void FailHead(Resource& r, const std::string& name, Failure failure);
  void OnWaitExpired(const std::string& name, uint64_t waiter_id);
  // timeout_ms: how long the round waits for the masters (0: the node timeout).
  void RunExtend(const std::string& name, const std::string& token, int64_t ttl_ms,
                 ExtendDone done, int64_t timeout_ms = 0);
  void WarnRenewalFailed(const std::string& name, const std::string& why);
  void RenewBacklogged();
  void ScheduleHolder(const std::string& name, Holder& h, int64_t delay_ms);
  // The one deadline of a waiter (wait_ms) or holder (renewal or end of validity), by serial.
  void SetDeadline(uint64_t serial, const std::string& name, Clock::time_point due);
  void OnDeadline(uint64_t serial, Clock::time_point due);
  void OnHolderTimer(const std::string& name, const std::string& token);
  void Lose(const std::string& name, std::string_view reason);
  std::unique_ptr<Holder> TakeHolder(Resource& r, const std::string& name);
  void ReleaseEverywhere(const std::string& key, const std::string& token);
  void ForgetWaiter(SessionId session, const std::string& name);
  void MaybeErase(const std::string& name);
  void MaybeFinishShutdown();
  Failure AttemptFailure(const std::string& name, const Waiter& w) const;

  void ReportAcquire(const Waiter& w, const std::string& name, ErrorCode code, bool granted);

  uv_loop_t* loop_;
  EngineOptions options_;
  EngineObserver* observer_;
  LostHandler on_lost_;
  Rounds rounds_;
  int fence_quorum_;
  std::unordered_map<std::string, std::unique_ptr<Resource>> resources_;
  std::unordered_map<SessionId, SessionIndex> sessions_;
  size_t holders_ = 0;
  uint64_t next_waiter_id_ = 1;
  std::mt19937_64 rng_;
  // Current deadline of each waiter (by id) and holder (by serial); deadlines_ fires them.
  struct Timed {
    std::string name;
    Clock::time_point due;
  };
  std::unordered_map<uint64_t, Timed> timed_;
  DeadlineQueue deadlines_;
  bool shutting_down_ = false;
  // Renewal rounds in flight at once; the rest wait in renew_backlog_ (name, holder serial).
  static constexpr size_t kMaxRenewalsInFlight = 256;
  size_t renewals_in_flight_ = 0;
  bool draining_backlog_ = false;  // RenewBacklogged is sending: do not queue behind itself
  std::deque<std::pair<std::string, uint64_t>> renew_backlog_;
  Clock::time_point last_renew_warning_{};
  uint64_t renew_warnings_suppressed_ = 0;
  std::function<void()> shutdown_done_;
  Timer defer_;  // runs callbacks that must not be synchronous
  std::vector<std::function<void()>> deferred_;
  void Defer(std::function<void()> fn);
};

}  // namespace lw
