#include "admin/admin_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>

#include "admin/answers.h"
#include "admin/bounded_http_server.h"
#include "admin/handlers.h"
#include "admin/views.h"
#include "admin/web_assets.h"

namespace lw {
namespace {

// A new snapshot comes every 250 ms; events, presence and scan results change in between.
constexpr auto kStateCacheMaxAge = std::chrono::milliseconds(250);

// "64 KiB", "1500 bytes".
std::string BytesText(int64_t bytes) {
  return bytes % 1024 == 0 ? std::to_string(bytes / 1024) + " KiB"
                           : std::to_string(bytes) + " bytes";
}

ActionHeaders HeadersOf(const httplib::Request& req) {
  return {req.get_header_value("Authorization"), req.get_header_value("Sec-Fetch-Site"),
          req.get_header_value("Origin"), req.get_header_value("Host")};
}

void AnswerException(const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
  std::string what = "unknown";
  try {
    std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  spdlog::error("admin: {} {} failed: {}", req.method, req.path, what);
  SendFailure(res, {ErrorCode::kInternal, "internal error; see the agent log"});
}

}  // namespace

AdminServer::AdminServer(ListenAddress listen, AdminContext context)
    : listen_(std::move(listen)),
      ctx_(std::move(context)),
      // Decided by the configured address, never by the peer: a listener on 0.0.0.0 is reachable
      // from elsewhere even when this request came over 127.0.0.1.
      read_scope_(IsLoopbackHost(listen_.host) ? ReadScope::kLoopback
                                               : ReadScope::kBeyondLoopback) {}

AdminServer::~AdminServer() { Stop(); }

std::optional<std::string> AdminServer::Start() {
  HttpBounds bounds;
  bounds.max_connections = static_cast<size_t>(ctx_.max_connections);
  bounds.timeout = ctx_.http_timeout;
  bounds.max_body_bytes = static_cast<size_t>(ctx_.max_body_bytes);
  // Called on server threads; stats are thread-safe. Not logged above debug: the metric is
  // the signal, and whoever causes these must not be able to flood the log.
  http_ = std::make_unique<BoundedHttpServer>(bounds, [stats =
                                                           ctx_.stats.get()](AdminRefusal reason) {
    stats->Count(reason);
    spdlog::debug("admin: connection refused: {}", kAdminRefusalNames[static_cast<size_t>(reason)]);
  });
  // cpp-httplib's default also sets SO_REUSEPORT, which would let a second agent bind the
  // same port and take half the scrapes. Only SO_REUSEADDR (quick restarts).
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  Register();
  const std::string host = listen_.host == "localhost" ? "127.0.0.1" : listen_.host;
  port_ = http_->Bind(host, listen_.port);
  if (port_ < 0) {
    const std::string hint =
        listen_.port == 0 ? "" : " (in use? another agent? set --admin-listen host:port or off)";
    return "admin_listen: cannot bind " + host + ":" + std::to_string(listen_.port) + hint;
  }
  thread_ = std::thread([this] { http_->Serve(); });
  return std::nullopt;
}

void AdminServer::Stop() {
  if (!thread_.joinable()) return;  // not started, or stopped already
  http_->Shutdown();
  thread_.join();
}

std::vector<AdminServer::Route> AdminServer::RouteTable() {
  auto with_context = [this](ContextHandler handler) -> Handler {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      handler(ctx_, req, res);
    };
  };
  std::vector<Route> routes = {
      // Prometheus text exposition.
      {"GET", "/metrics", Access::kState, with_context(ServeMetrics)},
      // 200 while the event loop publishes snapshots (it is not wedged).
      {"GET", "/healthz", Access::kOpen, with_context(ServeHealth)},
      // 200 while a quorum of masters is usable (ReadinessOf), else 503.
      {"GET", "/readyz", Access::kOpen, with_context(ServeReadiness)},
      // docs/runbooks.md, what the alert rules' runbook_url links into. The same in every
      // agent, no state in it: open, like the page's files.
      {"GET", "/runbooks", Access::kOpen, ServeRunbooks},
      // Everything the page shows.
      {"GET", "/api/v1/state", Access::kState,
       [this](const httplib::Request&, httplib::Response& res) { ServeState(res); }},
      // The leak scanner's latest findings.
      {"GET", "/api/v1/leaks", Access::kState, with_context(ServeLeaks)},
      // {"master","key","ttl_ms"}: a TTL on a still TTL-less key.
      {"POST", "/api/v1/leaks/expire", Access::kAction, with_context(ExpireLeakedKey),
       AdminAction::kExpireKey},
      // {"master","key"}: delete a still TTL-less key.
      {"POST", "/api/v1/leaks/delete", Access::kAction, with_context(DeleteLeakedKey),
       AdminAction::kDeleteKey},
      // Start a scan pass now.
      {"POST", "/api/v1/scan", Access::kAction, with_context(StartRescan), AdminAction::kRescan},
      // The fleet table (?prefix=&limit=), one resource's row (?resource=), and a revoke of a
      // lock held through any agent ({"resource"}): docs/fleet.md.
      {"GET", "/api/v1/fleet", Access::kState, with_context(ServeFleet)},
      {"GET", "/api/v1/fleet/who", Access::kState, with_context(ServeFleetWho)},
      {"POST", "/api/v1/fleet/revoke", Access::kAction, with_context(RevokeFleetLock),
       AdminAction::kFleetRevoke},
      // {"resource"}: force-release a lock held through this agent.
      {"POST", "/api/v1/locks/release", Access::kAction, with_context(ForceRelease),
       AdminAction::kForceRelease},
  };
  // The operator page: every file of web/, compiled in; "/" is index.html.
  for (const WebAsset& asset : WebAssets()) {
    Handler serve = [&asset](const httplib::Request& req, httplib::Response& res) {
      ServeAsset(asset, req, res);
    };
    routes.push_back({"GET", std::string(asset.path), Access::kOpen, serve});
    if (asset.path == "/index.html") routes.push_back({"GET", "/", Access::kOpen, serve});
  }
  return routes;
}

void AdminServer::Register() {
  routes_ = RouteTable();
  for (const Route& route : routes_) {
    Handler handler = route.access == Access::kAction ? Gated(route) : route.handler;
    if (route.method == "POST") {
      http_->Post(route.path, std::move(handler));
    } else {
      http_->Get(route.path, std::move(handler));
    }
  }
  http_->SetGate(
      [this](const httplib::Request& req, httplib::Response& res) { return GuardRead(req, res); });
  http_->set_error_handler(
      [this](const httplib::Request&, httplib::Response& res) { AnswerHttpError(res); });
  http_->set_exception_handler(AnswerException);
}

httplib::Server::HandlerResponse AdminServer::GuardRead(const httplib::Request& req,
                                                        httplib::Response& res) {
  const auto is = [&req](const Route& r, Access access, bool any_method) {
    return r.access == access && r.path == req.path && (any_method || r.method == req.method);
  };
  if (std::any_of(routes_.begin(), routes_.end(),
                  [&](const Route& r) { return is(r, Access::kAction, false); })) {
    return httplib::Server::HandlerResponse::Unhandled;  // Gated judges it
  }
  // Everything not open, unknown paths included, is judged.
  const bool open = std::any_of(routes_.begin(), routes_.end(),
                                [&](const Route& r) { return is(r, Access::kOpen, true); });
  const PathExposure exposure = open ? PathExposure::kOpen : PathExposure::kState;
  const ActionVerdict verdict =
      JudgeRead(req.get_header_value("Authorization"), ctx_.token, read_scope_, exposure);
  if (!verdict.refusal) return httplib::Server::HandlerResponse::Unhandled;
  spdlog::debug("admin: {} {} refused for {}: {}", req.method, Quote(req.path.substr(0, 200)),
                Who(req), verdict.message);
  SendRefusal(res, verdict);
  return httplib::Server::HandlerResponse::Handled;
}

AdminServer::Handler AdminServer::Gated(const Route& route) {
  return [this, route](const httplib::Request& req, httplib::Response& res) {
    const ActionVerdict verdict = JudgeAction(HeadersOf(req), ctx_.token);
    if (verdict.refusal) {
      ctx_.stats->Count(route.action, ActionResult::kRefused);
      Audit(
          ctx_, Severity::kWarning,
          fmt::format("{} refused for {}: {}", kAdminActionNames[static_cast<size_t>(route.action)],
                      Who(req), verdict.message));
      InvalidateState();
      return SendRefusal(res, verdict);
    }
    route.handler(req, res);
    InvalidateState();  // what it did is in the next answer (an event at least)
  };
}

void AdminServer::SendRefusal(httplib::Response& res, const ActionVerdict& verdict) {
  // 403 when no token would help (cross-site, disabled), else 401 with the challenge.
  const bool forbidden =
      verdict.refusal == Refusal::kCrossSite || verdict.refusal == Refusal::kDisabled;
  ctx_.stats->Count(forbidden ? AdminRefusal::kForbidden : AdminRefusal::kUnauthorized);
  SendFailure(res, {forbidden ? ErrorCode::kForbidden : ErrorCode::kUnauthorized, verdict.message});
}

void AdminServer::AnswerHttpError(httplib::Response& res) {
  if (!res.body.empty()) return;  // a handler's own error
  if (res.status == 404) return SendFailure(res, {ErrorCode::kNotFound, "no such endpoint"});
  if (res.status == 413 || res.status == 411) {  // refused on its headers, the body unread
    ctx_.stats->Count(AdminRefusal::kTooLarge);
    res.set_header("Connection", "close");
    return SendFailure(
        res, res.status,
        {ErrorCode::kBadRequest,
         res.status == 411 ? "a request body needs a Content-Length (a chunked one is refused)"
                           : "the body is larger than " + BytesText(ctx_.max_body_bytes) +
                                 " (admin_max_body_bytes)"});
  }
  SendFailure(
      res, res.status,
      {ErrorCode::kBadRequest, "malformed HTTP request (HTTP " + std::to_string(res.status) +
                                   "); a POST needs a Content-Length"});
}

void AdminServer::ServeState(httplib::Response& res) {
  // Someone is looking: keep checking where the held keys really are.
  if (ctx_.presence) ctx_.presence->Demand();
  std::string body = StateBody();
  if (body.empty()) return SendFailure(res, {ErrorCode::kStarting, "the agent is starting"});
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_content(std::move(body), "application/json");
}

std::string AdminServer::StateBody() {
  // Detail at most a second old; waits (about one snapshot interval, when nobody asked for a
  // while) for the loop to start building it again.
  auto snap = ctx_.snapshots->LatestDetailed(
      std::chrono::steady_clock::now() - std::chrono::seconds(1), std::chrono::milliseconds(500));
  if (!snap) return "";
  const auto now = std::chrono::steady_clock::now();
  // Rendered under the lock: concurrent readers wait for the one render and share it.
  std::lock_guard lock(state_cache_.mu);
  if (state_cache_.snapshot == snap && now - state_cache_.rendered < kStateCacheMaxAge) {
    return state_cache_.body;
  }
  auto report = ctx_.scanner ? ctx_.scanner->Latest() : nullptr;
  auto presence = ctx_.presence ? ctx_.presence->Latest() : nullptr;
  StateInputs in;
  in.snapshot = snap.get();
  in.agent = ctx_.agent;
  in.agent_id = ctx_.self.id;
  in.agent_name = ctx_.self.name;
  in.actions_enabled = !ctx_.token.empty();
  in.max_ttl_ms = ctx_.max_ttl_ms;
  in.stuck_after_ms = ctx_.stuck_after_ms;
  in.leaks = report.get();
  in.scan_interval_ms = ctx_.scanner ? ctx_.scanner->interval().count() : 0;
  in.presence = presence.get();
  if (ctx_.events) in.events = ctx_.events->Recent();
  if (ctx_.history) in.history = ctx_.history();
  state_cache_.body = Dump(StateView(in));
  state_cache_.snapshot = std::move(snap);
  state_cache_.rendered = now;
  return state_cache_.body;
}

void AdminServer::InvalidateState() {
  std::lock_guard lock(state_cache_.mu);
  state_cache_.snapshot.reset();
}

}  // namespace lw
