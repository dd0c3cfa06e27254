#pragma once
// Rounds: send one command to every master at once and count the answers.
//
// A round ends exactly once, at the first of: a decision (quorum won, or quorum no longer
// reachable), every master answered (when the caller asked to hear them all), or the
// round's timeout (the node timeout unless the request says otherwise). Answers arriving
// after the end are never counted. One libuv timer serves every round's deadline; a round
// whose deadline passed ends after the loop's next poll for I/O (Rounds::OnDeadline).

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/redlock_math.h"
#include "locking/engine_stats.h"
#include "redis/kind_scripts.h"
#include "redis/node.h"
#include "redis/timer.h"

namespace lw {

using Clock = std::chrono::steady_clock;

enum class RoundOp {
  kDeleteIfHeld,
  kExtendIfHeld,
  kRaiseFenceIfHeld,      // fenced acquire, phase 2
  // The semaphore and read-write kinds' scripts (redis/kind_scripts.h): RoundRequest::script.
  kKindAcquire,  // yes: an integer >= 0 (the fence counter read); no: nil or a refusal array
  kKindExtend,   // 1 / 0
  kKindRelease,  // 1 / 0; like kDeleteIfHeld, every master's answer counts
  kKindFence,    // as kRaiseFenceIfHeld, by a script (an election's record: kFenceRecord)
  // A read (kReadRecord): yes for a string or nil, kept in RoundResult::values; every master's
  // answer counts (a read decides nothing by itself). Use with wait_all.
  kKindRead,
};

struct RoundRequest {
  RoundOp op = RoundOp::kDeleteIfHeld;
  std::string key;
  std::string token;        // the key's value without the Rounds' value prefix
  int64_t ttl_ms = 0;      // set / extend
  std::string fence_key;   // fence ops
  int64_t fence = 0;       // kRaiseFenceIfHeld
  int needed = 0;          // yes votes needed in all, quarantined masters included (0: quorum)
  bool wait_all = false;   // end when every master answered, not at the first decision
  int64_t timeout_ms = 0;  // how long the round waits for answers (0: the node timeout)
  // Kind ops: the script, its KEYS, and its ARGV after the first (ARGV[1] is the value).
  scripts::KindScript script = scripts::KindScript::kCount;
  std::vector<std::string> keys;
  std::vector<std::string> args;
  // kKindAcquire of an exclusive hold where readers are marked (docs/safety.md §7): each master
  // gets SET key value NX PX ttl_ms first, a native command, and the script only if it refused
  // (the script then decides, as if sent alone). A SET's OK is a yes vote with fence 0.
  bool native = false;
};

// Why masters refused a kind acquire (kKindAcquire's refusal arrays), as counted in a round.
struct KindRefusals {
  std::optional<std::string> foreign;  // a value found at P R that is not this kind's marker
  std::vector<int> free_permits;       // by permit: masters that reported it free
  int writer = 0;                      // masters where a writer holds it
  int readers = 0;                     // masters where readers hold it
  int writer_waiting = 0;              // masters where a writer waits (new readers refused)
  int taken = 0;                       // masters where the permit asked for is held
};

struct RoundResult {
  VoteTally tally;            // the votes counted
  Clock::time_point started;  // when the commands were sent (before any was written)
  int64_t max_fence = -1;     // kKindAcquire: the highest counter among the yes votes
  int fence_refused = 0;      // kRaiseFenceIfHeld: masters whose counter was already >= fence
  KindRefusals refusals;      // kKindAcquire
  // kKindRead, by node index: nullopt for no answer (or an error), "" never (nil is nullopt
  // too: see read_nil).
  std::vector<std::optional<std::string>> values;
  std::vector<bool> read_nil;  // kKindRead, by node index: the master answered nil
  // kKindAcquire asked how long others wait: the longest any yes vote reported for another
  // agent's oldest waiter (ms; -1: none reported one).
  int64_t others_waited_ms = -1;
  int others_untold = 0;  // kKindAcquire: yes votes that did not say (an integer answer)
};
using RoundDone = std::function<void(const RoundResult& result)>;

// Compare-and-delete on every master, waiting for every answer (or the node timeout).
RoundRequest DeleteRound(const std::string& key, const std::string& token);

class Rounds {
 public:
  // stats: counts masters that missed a round's deadline (not owned; null: not counted).
  // value_prefix: what every value sent to the masters starts with (the agent's
  // "<agent id>:", fleet::LockValue): the key holds value_prefix + RoundRequest::token. The one
  // place a token becomes a key's value.
  Rounds(uv_loop_t* loop, std::vector<Node*> nodes, int64_t node_timeout_ms,
         EngineStats* stats = nullptr, std::string value_prefix = "");

  // Starts a round; `done` runs later, from the event loop, never from inside Run.
  // Acquire, extend and fence votes of a master in restart quarantine (Node::votes_count(),
  // asked when the round starts) do not count toward quorum; release votes always count.
  void Run(RoundRequest request, RoundDone done);

  size_t in_flight() const { return rounds_.size(); }
  int size() const { return static_cast<int>(nodes_.size()); }
  int quorum() const { return quorum_; }
  const std::vector<Node*>& nodes() const { return nodes_; }

 private:
  // A native round's script, sent to a master whose SET NX was refused.
  struct Fallback {
    scripts::KindScript script;
    std::vector<std::string> keys;
    std::string value;
    std::vector<std::string> args;
    std::vector<bool> sent;  // by node index: the script went there (its answer is final)
  };
  struct Round {
    RoundResult result;
    RoundOp op;
    bool wait_all;
    RoundDone done;
    std::vector<bool> answered;  // by node index
    std::vector<bool> counts;    // by node index: does its vote count toward quorum
    std::unique_ptr<Fallback> fallback;  // native rounds only
  };

  void OnAnswer(uint64_t id, size_t node, const Reply& reply);
  void Finish(uint64_t id, bool by_deadline);
  void OnDeadline();
  void ExpireDue();
  void ArmTimer();

  std::vector<Node*> nodes_;
  EngineStats* stats_;
  std::string value_prefix_;
  int quorum_;
  std::chrono::milliseconds node_timeout_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Round> rounds_;
  using Deadline = std::pair<Clock::time_point, uint64_t>;
  // A min-heap (std::push_heap with std::greater). Entries of rounds that already ended are
  // skipped when they come up, and dropped when they outnumber the rounds in flight.
  std::vector<Deadline> deadlines_;
  Clock::time_point armed_for_ = Clock::time_point::max();  // the deadline the timer is set for
  Timer timer_;
  // Rounds due by expire_upto_ end after the loop's next poll (OnDeadline).
  Clock::time_point expire_upto_{};
  AfterPoll after_poll_;
};

}  // namespace lw
