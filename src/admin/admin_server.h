#pragma once
// AdminServer: the HTTP side of the agent (cpp-httplib, its own small thread pool).
//
//   GET  /                     the operator page (every file of web/, compiled in)
//   GET  /metrics              Prometheus text exposition
//   GET  /healthz              200 while the event loop publishes snapshots (it is not wedged)
//   GET  /readyz               200 while a quorum of masters is usable, else 503
//   GET  /api/v1/state         everything the page shows (docs/api.md)
//   GET  /api/v1/leaks         the leak scanner's latest findings
//   POST /api/v1/leaks/expire  {"master","key","ttl_ms"}: TTL on a still TTL-less key
//   POST /api/v1/leaks/delete  {"master","key"}: delete a still TTL-less key
//   POST /api/v1/scan          start a scan pass now
//   POST /api/v1/locks/release {"resource"}: force-release a lock held through this agent
//
// Handlers read the loop's latest Snapshot and the scanner's latest report; they never touch
// loop-owned state. POST actions need the admin token and a same-origin (or non-browser)
// request, and are written to the log as audit lines. On a listener bound beyond loopback every
// read but /healthz, /readyz and the page's files needs the token too (JudgeRead). The server is
// bounded (BoundedHttpServer): connections at once, a deadline per request and response, body
// size; what it refuses is counted in lockwarden_admin_refusals_total.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "admin/auth.h"
#include "admin/views.h"
#include "agent/snapshot.h"
#include "config/config.h"
#include "core/defaults.h"
#include "observe/metrics.h"
#include "observe/recent.h"
#include "scan/leak_scanner.h"
#include "scan/presence_probe.h"

namespace lw {

class BoundedHttpServer;

// What a force-release did, as the loop reports it.
struct RevokeOutcome {
  bool held = false;     // false: nobody held the resource through this agent
  uint64_t session = 0;  // the holder's session, and its peer credentials
  int pid = -1;
  int uid = -1;
  int deleted = 0;       // masters that deleted the key with the holder's token
  int masters = 0;
};
// Runs a force-release on the loop and waits for it; nullopt when the loop did not answer in
// time (or is shutting down).
using RevokeFn = std::function<std::optional<RevokeOutcome>(const std::string& resource,
                                                            std::chrono::milliseconds timeout)>;

struct AdminContext {
  Metrics* metrics = nullptr;
  const SnapshotBox* snapshots = nullptr;
  LeakScanner* scanner = nullptr;  // null when the scanner is off
  EventLog* events = nullptr;      // admin actions are added; null: none kept
  std::function<std::vector<HistoryPoint>()> history;  // null: no history
  PresenceProbe* presence = nullptr;                    // null: presence not checked
  AgentFacts agent;
  int64_t stuck_after_ms = kDefaultStuckAfterMs;
  std::vector<MasterAddress> masters;
  int64_t max_ttl_ms = kDefaultMaxTtlMs;  // bound of the TTL an operator may set on a leaked key
  RevokeFn revoke;                 // null: force-release unavailable
  std::string token;               // empty: actions are disabled
  std::chrono::milliseconds stale_after{5000};  // snapshot age at which /healthz fails
  std::chrono::milliseconds action_timeout{2000};
  // The server's own bounds (admin_max_connections, admin_timeout_ms, admin_max_body_bytes):
  // connections served or waiting at once (one more gets 503), the deadline to receive a request
  // and to send its response, the largest request body (a larger one gets 413).
  int64_t max_connections = kDefaultAdminMaxConnections;
  std::chrono::milliseconds http_timeout{kDefaultAdminTimeoutMs};
  int64_t max_body_bytes = kDefaultAdminMaxBodyBytes;
};

class AdminServer {
 public:
  AdminServer(ListenAddress listen, AdminContext context);
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Binds and starts serving on a thread of its own; a human error if it cannot bind.
  std::optional<std::string> Start();
  int port() const { return port_; }
  void Stop();

 private:
  void Routes();
  // Beyond loopback, every read but the open paths needs the token (JudgeRead); the action
  // POSTs keep their own, stricter gate (JudgeAction), which audits.
  void GuardReads();

  // The state answer, rendered once per published snapshot whatever the number of readers (at
  // 1000 locks a render is ~8 ms; many pages, or a script polling flat out, must not cost the
  // lock path more than one render per snapshot). Actions invalidate it.
  struct StateCache {
    std::mutex mu;
    std::shared_ptr<const Snapshot> snapshot;
    std::chrono::steady_clock::time_point rendered;
    std::string body;
  };
  std::string StateBody();
  void InvalidateState();

  ListenAddress listen_;
  AdminContext ctx_;
  ReadScope read_scope_;
  std::set<std::string, std::less<>> open_paths_;    // reads that never need the token
  std::set<std::string, std::less<>> action_paths_;  // POSTs that JudgeAction gates and audits
  StateCache state_cache_;
  std::unique_ptr<BoundedHttpServer> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace lw
