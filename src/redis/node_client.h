#pragma once
// NodeClient: one asynchronous hiredis connection to one master, driven by the libuv loop.
//
// All commands from all clients share the connection (hiredis pipelines them; writes are
// flushed once per loop turn). hiredis 0.14 has no timeouts, so this class owns them:
//  - connect + handshake (AUTH, SCRIPT LOAD, INFO server, PING) must finish within
//    connect_timeout;
//  - a connection whose oldest command has waited longer than connect_timeout is stalled
//    (e.g. a SIGSTOPped master) and is dropped and reconnected;
//  - reconnects back off exponentially up to reconnect_max_backoff.
// The handshake asks INFO server for the master's run_id and uptime, and asks again every 5 s.
// A restart always drops the connection, so a master's votes are never counted before we know
// whether it restarted: restart quarantine (core/quarantine.h) keeps them out of quorum until
// max_ttl after its start. If INFO is refused, the connection is used anyway but quarantined for
// max_ttl. INFO is not a lock command: it is not measured and counts no errors.
// Per-command timeouts are the engine's business (it stops counting at its own deadline).
// While the connection is not ready, commands fail at once with kUnavailable.

#include <uv.h>

#include <array>
#include <chrono>
#include <deque>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/defaults.h"
#include "core/master_address.h"
#include "core/quarantine.h"
#include "redis/connection.h"
#include "redis/latency_window.h"
#include "redis/node.h"
#include "redis/node_stats.h"
#include "redis/script_batch.h"
#include "redis/timer.h"

struct redisAsyncContext;
struct redisReply;

namespace lw {

struct NodeClientOptions {
  int64_t connect_timeout_ms = kDefaultConnectTimeoutMs;
  int64_t reconnect_max_backoff_ms = kDefaultReconnectMaxBackoffMs;
  int64_t health_interval_ms = kDefaultHealthIntervalMs;
  NodeStats* stats = nullptr;    // not owned; null: counted where nobody reads them
  NodeEvents* events = nullptr;  // not owned; null: nobody told
  int64_t max_ttl_ms = kDefaultMaxTtlMs;  // the longest a lock may live: the quarantine's length
  bool restart_quarantine = true;    // false: votes always count (restarts are still logged)
};

class NodeClient final : public Node, Connection::Listener {
 public:
  NodeClient(uv_loop_t* loop, MasterAddress address, NodeClientOptions options);
  ~NodeClient() override;
  NodeClient(const NodeClient&) = delete;
  NodeClient& operator=(const NodeClient&) = delete;

  // Starts connecting; reconnects on its own from then on.
  void Start();
  // Closes the connection and stops reconnecting. Pending commands fail with kDisconnected.
  void Stop();

  void DeleteIfHeld(const std::string& key, const std::string& token,
                    ReplyHandler handler) override;
  void ExtendIfHeld(const std::string& key, const std::string& token, int64_t ttl_ms,
                    ReplyHandler handler) override;
  void RaiseFenceIfHeld(const std::string& key, const std::string& fence_key,
                        const std::string& token, int64_t fence, ReplyHandler handler) override;
  void SetIfAbsent(const std::string& key, std::string_view value, int64_t ttl_ms,
                   ReplyHandler handler) override;
  void RunKindScript(scripts::KindScript script, std::span<const std::string> keys,
                     std::string_view value, std::span<const std::string> args,
                     ReplyHandler handler) override;
  // False while in restart quarantine; ends on time (checked against the clock, no timer).
  bool votes_count() const override;
  NodeStatus status() const override;

 private:
  enum class State { kIdle, kConnecting, kHandshaking, kReady, kStopped };
  // The lock scripts: scripts.h's three, then kind_scripts.h's in their order. Their calls
  // are queued per loop turn and sent as one command (redis/script_batch.h).
  enum class Script : size_t { kDeleteIfHeld, kExtendIfHeld, kRaiseFenceIfHeld, kFirstKindScript };
  static constexpr size_t kScripts = 3 + static_cast<size_t>(scripts::KindScript::kCount);
  static constexpr size_t kBatchScript = kScripts;  // its sha's index in shas_
  static constexpr size_t kMaxBatch = 128;          // calls per command at most
  using Clock = std::chrono::steady_clock;

  struct Call {
    ReplyHandler handler;
    NodeCommand command;
  };
  // One per command in flight; handed to hiredis as privdata so every reply (or the NULL
  // "connection gone" reply) finds its handler even after the connection was replaced.
  // A command is either a single one (handler) or a batch of lock-script calls.
  struct Pending {
    NodeClient* owner = nullptr;
    uint64_t generation = 0;  // which connection carried it
    ReplyHandler handler;
    NodeCommand command = NodeCommand::kCount;  // kCount: handshake, not measured
    Clock::time_point sent_at;
    ScriptBatch batch;        // a batch: its calls' encoding, kept for the EVAL fallback
    std::vector<Call> calls;  // a batch: by call, in order
  };

  static void OnReply(redisAsyncContext* ac, void* reply, void* privdata);

  void Connect();
  // Connection::Listener: connected and authenticated; sends the rest of the handshake.
  void Opened() override;
  void HandshakeStep(const Reply& reply, const char* what);
  void BecomeReady();
  // Connection::Listener.
  void Lost(const std::string& why, bool refused) override;
  void ScheduleReconnect();
  // Counts and reports a failed attempt (conn_.last_failure() says its kind).
  void CountConnectFailure(const std::string& why);
  void HealthTick();
  // The oldest command sent has had no answer for longer than the connect timeout.
  bool Stalled(Clock::time_point now) const;
  void SendInfo(Clock::time_point now);
  // handshake: the connection's first answer, which decides whether its votes may count.
  void InfoReceived(const Reply& reply, bool handshake);
  void Quarantine(const QuarantineVerdict& verdict, Clock::time_point now);
  void EndQuarantineIfOver(Clock::time_point now);
  void ReportError(NodeError kind);
  // Counts one answer of `command` that took `latency` (an error reply counts as an error too).
  void Answered(NodeCommand command, Clock::duration latency, const Reply& reply);
  // Lock scripts (node_client_scripts.cc).
  static const char* ScriptBody(size_t index);  // index < kScripts, or kBatchScript
  void Enqueue(Script script, std::initializer_list<std::string_view> keys,
               std::initializer_list<std::string_view> args, ReplyHandler handler);
  void Enqueue(size_t index, std::span<const std::string_view> keys,
               std::span<const std::string_view> args, ReplyHandler handler);
  static void FlushBatchOf(void* self);
  void FlushBatch();
  void SendBatch(std::unique_ptr<Pending> pending, bool by_sha);
  void AnswerBatch(std::unique_ptr<Pending> pending, const redisReply* reply);
  void FailQueued();
  void Send(int argc, const char** argv, const size_t* lens, std::unique_ptr<Pending> pending);
  void SendInternal(std::initializer_list<std::string_view> args, ReplyHandler handler,
                    NodeCommand command = NodeCommand::kCount);
  void FailSoon(ReplyHandler handler);
  void HandleReply(std::unique_ptr<Pending> pending, Reply reply);

  MasterAddress address_;
  std::string display_;
  NodeClientOptions options_;
  std::unique_ptr<stats::Registry> own_registry_;  // only when no stats were given
  std::unique_ptr<NodeStats> own_stats_;
  NodeStats& stats_;
  NodeEvents& events_;
  State state_ = State::kIdle;
  Connection conn_;
  uint64_t generation_ = 0;
  std::deque<Clock::time_point> sent_;  // send times of the current connection's commands
  std::array<std::string, kScripts + 1> shas_;  // by index; "" until SCRIPT LOAD answered
  ScriptBatch batch_;        // calls queued this loop turn
  std::vector<Call> queued_;  // their handlers, in order
  std::string channel_;       // DeleteIfHeld's release channel, built here to spare an allocation
  int handshake_left_ = 0;
  bool ever_ready_ = false;
  bool health_ping_in_flight_ = false;
  Clock::time_point last_health_ping_;
  double rtt_ms_ = 0;
  uint64_t reconnects_ = 0;
  LatencyWindow latency_;  // measured commands: lock commands and health PINGs
  uint64_t errors_ = 0;    // every NodeError counted here
  // INFO server: one in flight at most; what the last answer said, and when.
  bool info_in_flight_ = false;
  Clock::time_point last_info_sent_;
  std::string run_id_;               // "" until an INFO answer said it
  Clock::time_point run_started_at_;  // our estimate of when run_id_ started (never too early)
  Clock::time_point run_alive_at_;    // last reply on a connection whose run_id was run_id_
  uint64_t run_id_generation_ = 0;    // the connection whose INFO said run_id_
  std::optional<Clock::time_point> quarantine_until_;  // restart quarantine; none: votes count
  QuarantineVerdict quarantine_;  // the last verdict that quarantined it: its reason's facts
  std::optional<int64_t> uptime_s_;
  Clock::time_point uptime_at_;     // when uptime_s_ was answered
  uint64_t uptime_generation_ = 0;  // by which connection (uptime is shown only for the current)
  std::string last_error_ = "not connected yet";
  // The kind of the last failure logged as a warning; kCount: none since the connection was up.
  ConnectFailure last_failure_logged_ = ConnectFailure::kCount;
  Timer health_timer_;
  Timer fail_timer_;
  AfterPoll stall_check_;  // a stall seen by HealthTick, judged after the next poll
  std::deque<ReplyHandler> to_fail_;  // commands refused while not ready, failed next turn
};

}  // namespace lw
