#pragma once
// The engine's view of one Redis master: the lock commands and a health summary.
// LockEngine is written against this interface so that its tests can script a master.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <vector>

#include "redis/kind_scripts.h"
#include "redis/reply.h"

namespace lw {

// Invoked exactly once per command, never synchronously from inside the call that sent it.
using ReplyHandler = std::function<void(const Reply&)>;

struct NodeStatus {
  std::string addr;        // host:port, no credentials
  // "off" (redis://), "verified" (rediss://, certificate checked) or "unverified" (rediss://
  // with redis_tls_insecure_skip_verify).
  std::string tls = "off";
  bool up = false;         // connected and handshaken: commands are being sent
  double rtt_ms = 0;       // last health-check round trip
  uint64_t reconnects = 0; // successful connections after the first
  std::string last_error;  // why it is down, if it is
  // Over the last 1024 measured commands (lock commands + health PINGs); nullopt until one.
  std::optional<double> rtt_p50_ms;
  std::optional<double> rtt_p99_ms;
  // Every error this connection counted since start (error replies, unavailable,
  // disconnected, connect failures, stalls; not the engine's timeouts).
  uint64_t errors = 0;
  // Redis uptime_in_seconds, from the last INFO server, advanced by the time since that reply;
  // nullopt until known or while down.
  std::optional<int64_t> uptime_s;
  std::string run_id;  // Redis run_id from the last INFO server; "" until known
  // Restart quarantine: the master may have forgotten locks (it started less than max_ttl ago,
  // or its run_id changed), so its votes do not count toward acquire or extend quorum.
  bool quarantined = false;
  std::optional<int64_t> quarantine_left_ms;  // while quarantined: until its votes count again
  std::string quarantine_reason;              // while quarantined: why, for people
};

// What the operator page's event log hears from a master connection, as it happens. Counts
// and durations are not here: NodeClient counts them itself in NodeStats (redis/node_stats.h).
// Called on the loop thread; must be cheap. Every method defaults to doing nothing.
class NodeEvents {
 public:
  virtual ~NodeEvents() = default;
  // The connection is established and handshaken: its commands are being sent.
  virtual void Up() {}
  // The connection that was up is gone (why: for people).
  virtual void Down(const std::string& /*why*/) {}
  // An attempt to connect failed before the connection was up.
  virtual void ConnectFailed(const std::string& /*why*/) {}
  // Restart quarantine began (reason: why; left: until its votes count again).
  virtual void QuarantineEntered(const std::string& /*reason*/,
                                 std::chrono::milliseconds /*left*/) {}
  // Restart quarantine is over: its votes count again.
  virtual void QuarantineLeft() {}
};

class Node {
 public:
  virtual ~Node() = default;
  // Compare-and-delete. Integer 1 = deleted, 0 = the key holds another token or is gone.
  virtual void DeleteIfHeld(const std::string& key, const std::string& token,
                            ReplyHandler handler) = 0;
  // Compare-and-pexpire. Integer 1 = extended, 0 = not held by token.
  virtual void ExtendIfHeld(const std::string& key, const std::string& token, int64_t ttl_ms,
                            ReplyHandler handler) = 0;
  // Fenced acquire, phase 2 (one script): only if key still holds token, raise the counter at
  // fence_key to fence. Integer 1 = raised; 0 = key not held by token (nothing written);
  // -1 = the counter was already >= fence (nothing written).
  virtual void RaiseFenceIfHeld(const std::string& key, const std::string& fence_key,
                                const std::string& token, int64_t fence, ReplyHandler handler) = 0;
  // SET key value NX PX ttl_ms, a native command: status OK = set, nil = the key exists.
  virtual void SetIfAbsent(const std::string& key, std::string_view value, int64_t ttl_ms,
                           ReplyHandler handler) = 0;
  // One of the semaphore and read-write scripts (redis/kind_scripts.h) with its KEYS and ARGV:
  // ARGV[1] is `value` (the hold's value), then `args`. Replies as that file says. Nothing is
  // kept of the spans after the call.
  virtual void RunKindScript(scripts::KindScript script, std::span<const std::string> keys,
                             std::string_view value, std::span<const std::string> args,
                             ReplyHandler handler) = 0;
  // False while the master is in restart quarantine: its answers are still sent and applied,
  // but its votes do not count toward acquire or extend quorum (releases count everywhere).
  virtual bool votes_count() const { return true; }
  virtual NodeStatus status() const = 0;
};

}  // namespace lw
