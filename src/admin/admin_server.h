#pragma once
// AdminServer: the HTTP side of the agent (cpp-httplib, its own small thread pool): /metrics,
// the probes /healthz and /readyz, the state API under /api/v1 (docs/api.md) and the operator
// page. Its routes are the rows of one table (AdminServer::RouteTable): registration and who
// may call what both come from it.
//
// Handlers read the loop's latest Snapshot and the scanner's latest report; they never touch
// loop-owned state. Actions need the admin token and a same-origin (or non-browser) request,
// and are written to the log as audit lines. On a listener bound beyond loopback every read but
// the open routes (the probes and the page's files) needs the token too (JudgeRead). The server
// is bounded (BoundedHttpServer): connections at once, a deadline per request and response,
// body size; what it refuses is counted in lockwarden_admin_refusals_total.

#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "admin/admin_context.h"
#include "admin/auth.h"
#include "config/config.h"

namespace lw {

class BoundedHttpServer;

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
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  // Who may call a route.
  enum class Access {
    kOpen,    // anyone: the probes and the page's files (no state in them)
    kState,   // a read: anyone on a loopback listener, beyond it the token holder (JudgeRead)
    kAction,  // a change: the token holder, same-origin or not a browser (JudgeAction); audited
  };
  struct Route {
    std::string method;  // "GET" or "POST"
    std::string path;
    Access access;
    Handler handler;
    AdminAction action = AdminAction::kCount;  // kAction: what it counts and audits
  };
  std::vector<Route> RouteTable();
  // Registers every route, the gates and the error answers on http_.
  void Register();
  // Runs before a request's body is read: a read the scope and its route's access refuse is
  // answered here; actions pass on to their own gate (Gated).
  httplib::Server::HandlerResponse GuardRead(const httplib::Request& req, httplib::Response& res);
  // The route's handler behind JudgeAction: a refusal is counted, audited and answered.
  Handler Gated(const Route& route);
  // 401 or 403 for a refused read or action, counted in lockwarden_admin_refusals_total.
  void SendRefusal(httplib::Response& res, const ActionVerdict& verdict);
  // httplib's own errors (404, 411, 413, a malformed request) as error bodies.
  void AnswerHttpError(httplib::Response& res);
  void ServeState(httplib::Response& res);

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
  std::vector<Route> routes_;  // set once by Register, before serving
  StateCache state_cache_;
  std::unique_ptr<BoundedHttpServer> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace lw
