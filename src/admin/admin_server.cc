#include "admin/admin_server.h"

#include <httplib.h>
#include <sys/socket.h>
#include <spdlog/spdlog.h>

#include "admin/auth.h"
#include "admin/bounded_http_server.h"
#include "admin/views.h"
#include "admin/web_assets.h"
#include "core/resource_name.h"
#include "core/unix_time.h"
#include "scan/remedy.h"

namespace lw {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr size_t kMaxKeyBytes = 4096;
// A new snapshot comes every 250 ms; events, presence and scan results change in between.
constexpr auto kStateCacheMaxAge = std::chrono::milliseconds(250);

void SendJson(httplib::Response& res, int status, const ordered_json& body) {
  res.status = status;
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_content(Dump(body), "application/json");
}

void SendError(httplib::Response& res, int status, std::string_view code,
               std::string_view message) {
  SendJson(res, status, ErrorView(code, message));
}

// A refusal by the action or the read gate: 403 when no token would help (cross-site, disabled),
// else 401 with the challenge. Counted in lockwarden_admin_refusals_total.
void SendRefusal(const AdminContext& ctx, httplib::Response& res, Refusal refusal,
                 std::string_view message) {
  const bool forbidden = refusal == Refusal::kCrossSite || refusal == Refusal::kDisabled;
  ctx.metrics->CountAdminRefusal(forbidden ? "forbidden" : "unauthorized");
  if (!forbidden) res.set_header("WWW-Authenticate", "Bearer realm=\"lockwarden\"");
  SendError(res, forbidden ? 403 : 401, forbidden ? "forbidden" : "unauthorized", message);
}

// "64 KiB", "1500 bytes".
std::string BytesText(int64_t bytes) {
  return bytes % 1024 == 0 ? std::to_string(bytes / 1024) + " KiB"
                           : std::to_string(bytes) + " bytes";
}

// JSON-quoted, so a key or header cannot forge log lines.
std::string Quote(const std::string& text) {
  return ordered_json(text).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

// "who" for the audit line: the peer address and its user agent.
std::string Who(const httplib::Request& req) {
  std::string who = req.remote_addr + ":" + std::to_string(req.remote_port);
  const std::string agent = req.get_header_value("User-Agent");
  if (!agent.empty()) who += " (" + Quote(agent.substr(0, 120)) + ")";
  return who;
}

struct LeakRequest {
  size_t master = 0;
  std::string key;
  int64_t ttl_ms = 0;
};

// Validates the JSON body of a leak action; fills `out` or returns the problem.
std::optional<std::string> ParseLeakRequest(const std::string& body, bool expire,
                                            const AdminContext& ctx, LeakRequest& out) {
  ordered_json j;
  try {
    j = ordered_json::parse(body);
  } catch (const std::exception&) {
    return "the body must be a JSON object";
  }
  if (!j.is_object()) return "the body must be a JSON object";
  for (const auto& [name, value] : j.items()) {
    if (name != "master" && name != "key" && !(expire && name == "ttl_ms")) {
      return "unknown field \"" + name + "\"; known: master, key" +
             std::string(expire ? ", ttl_ms" : "");
    }
  }
  if (!j.contains("master") || !j["master"].is_string()) {
    return "\"master\" (string, host:port as listed by /api/v1/leaks) is required";
  }
  const std::string master = j["master"];
  bool found = false;
  for (size_t i = 0; i < ctx.masters.size() && !found; ++i) {
    if (ctx.masters[i].Display() == master) {
      out.master = i;
      found = true;
    }
  }
  if (!found) return "\"master\": " + master + " is not one of this agent's masters";
  if (!j.contains("key") || !j["key"].is_string() || j["key"].get<std::string>().empty()) {
    return "\"key\" (non-empty string) is required";
  }
  out.key = j["key"];
  if (out.key.size() > kMaxKeyBytes) return "\"key\" is longer than 4096 bytes";
  if (expire) {
    if (!j.contains("ttl_ms") || !j["ttl_ms"].is_number_integer()) {
      return "\"ttl_ms\" (integer, milliseconds) is required";
    }
    out.ttl_ms = j["ttl_ms"];
    if (out.ttl_ms < 1 || out.ttl_ms > ctx.max_ttl_ms) {
      return "\"ttl_ms\" must be between 1 and max_ttl_ms (" + std::to_string(ctx.max_ttl_ms) +
             ")";
    }
  }
  return std::nullopt;
}

// One audit line in the log, and the same words in the page's recent events.
void Audit(const AdminContext& ctx, Severity severity, const std::string& what) {
  spdlog::log(severity == Severity::kInfo ? spdlog::level::info : spdlog::level::warn,
              "audit: {}", what);
  if (ctx.events) ctx.events->Add({UnixMsNow(), "admin", severity, what, 1});
}

// The page may run only its own scripts and talk only to this agent, and may not be framed
// (an action button must never be clickjacked).
void PageHeaders(httplib::Response& res) {
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                 "connect-src 'self'; base-uri 'none'; form-action 'none'; "
                 "frame-ancestors 'none'");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-cache");
}

ActionHeaders HeadersOf(const httplib::Request& req) {
  return {req.get_header_value("Authorization"), req.get_header_value("Sec-Fetch-Site"),
          req.get_header_value("Origin"), req.get_header_value("Host")};
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
  // Called on server threads; metrics are thread-safe. Not logged above debug: the metric is
  // the signal, and whoever causes these must not be able to flood the log.
  http_ = std::make_unique<BoundedHttpServer>(
      bounds, [metrics = ctx_.metrics](std::string_view reason) {
        metrics->CountAdminRefusal(reason);
        spdlog::debug("admin: connection refused: {}", reason);
      });
  // cpp-httplib's default also sets SO_REUSEPORT, which would let a second agent bind the
  // same port and take half the scrapes. Only SO_REUSEADDR (quick restarts).
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  Routes();
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

void AdminServer::GuardReads() {
  // Open: the probes, and the page's files (the same in every agent: no state in them).
  open_paths_ = {"/healthz", "/readyz", "/"};
  for (const WebAsset& asset : WebAssets()) open_paths_.emplace(asset.path);
  action_paths_ = {"/api/v1/leaks/expire", "/api/v1/leaks/delete", "/api/v1/scan",
                   "/api/v1/locks/release"};
  // Decided before the body is read. Everything not open, unknown paths included, is judged.
  http_->SetGate([this](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "POST" && action_paths_.contains(req.path)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    const PathExposure exposure =
        open_paths_.contains(req.path) ? PathExposure::kOpen : PathExposure::kState;
    const ActionVerdict verdict =
        JudgeRead(req.get_header_value("Authorization"), ctx_.token, read_scope_, exposure);
    if (!verdict.refusal) return httplib::Server::HandlerResponse::Unhandled;
    spdlog::debug("admin: {} {} refused for {}: {}", req.method, Quote(req.path.substr(0, 200)),
                  Who(req), verdict.message);
    SendRefusal(ctx_, res, *verdict.refusal, verdict.message);
    return httplib::Server::HandlerResponse::Handled;
  });
}

void AdminServer::Routes() {
  httplib::Server& s = *http_;
  AdminContext& ctx = ctx_;
  GuardReads();

  s.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(ctx.metrics->Serialize(), "text/plain; version=0.0.4; charset=utf-8");
  });

  s.Get("/healthz", [&ctx](const httplib::Request&, httplib::Response& res) {
    auto snap = ctx.snapshots->Latest();
    const auto age = snap ? std::chrono::steady_clock::now() - snap->taken
                          : std::chrono::steady_clock::duration::max();
    if (snap && age < ctx.stale_after) {
      res.set_content("ok\n", "text/plain");
      return;
    }
    res.status = 503;
    res.set_content(snap ? "event loop stalled: no state published for " +
                               std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  age).count()) + " ms\n"
                         : std::string("starting\n"),
                    "text/plain");
  });

  s.Get("/readyz", [&ctx](const httplib::Request&, httplib::Response& res) {
    auto snap = ctx.snapshots->Latest();
    if (!snap) {
      res.status = 503;
      res.set_content("not ready: starting\n", "text/plain");
      return;
    }
    const int quarantined = snap->masters_up - snap->masters_usable;
    const std::string counts =
        std::to_string(snap->masters_up) + " of " + std::to_string(snap->masters.size()) +
        " masters up" +
        (quarantined > 0 ? " (" + std::to_string(quarantined) + " in restart quarantine)" : "") +
        ", " + std::to_string(snap->masters_usable) + " usable, quorum " +
        std::to_string(snap->quorum);
    if (snap->masters_usable >= snap->quorum) {
      res.set_content("ready: " + counts + "\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content("not ready: " + counts + "\n", "text/plain");
    }
  });

  for (const WebAsset& asset : WebAssets()) {
    auto serve = [&asset](const httplib::Request& req, httplib::Response& res) {
      PageHeaders(res);
      res.set_header("ETag", std::string(asset.etag));
      if (req.get_header_value("If-None-Match") == asset.etag) {
        res.status = 304;
        return;
      }
      res.set_content(asset.body.data(), asset.body.size(), std::string(asset.content_type));
    };
    s.Get(std::string(asset.path), serve);
    if (asset.path == "/index.html") s.Get("/", serve);
  }

  s.Get("/api/v1/state", [this](const httplib::Request&, httplib::Response& res) {
    // Someone is looking: keep checking where the held keys really are.
    if (ctx_.presence) ctx_.presence->Demand();
    std::string body = StateBody();
    if (body.empty()) return SendError(res, 503, "starting", "the agent is starting");
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(std::move(body), "application/json");
  });

  s.Get("/api/v1/leaks", [&ctx](const httplib::Request&, httplib::Response& res) {
    auto report = ctx.scanner ? ctx.scanner->Latest() : nullptr;
    SendJson(res, 200, LeaksView(report.get(), ctx.scanner ? ctx.scanner->interval().count() : 0));
  });

  // Every POST goes through the same gate and the same audit line.
  auto action = [this, &ctx](const char* name, auto body) {
    return [this, &ctx, name, body](const httplib::Request& req, httplib::Response& res) {
      const ActionVerdict verdict = JudgeAction(HeadersOf(req), ctx.token);
      if (verdict.refusal) {
        ctx.metrics->CountAdminAction(name, "refused");
        Audit(ctx, Severity::kWarning,
              fmt::format("{} refused for {}: {}", name, Who(req), verdict.message));
        InvalidateState();
        return SendRefusal(ctx, res, *verdict.refusal, verdict.message);
      }
      body(req, res);
      InvalidateState();  // what it did is in the next answer (an event at least)
    };
  };

  auto leak_action = [&ctx](const char* name, bool expire) {
    return [&ctx, name, expire](const httplib::Request& req, httplib::Response& res) {
      LeakRequest lr;
      if (auto problem = ParseLeakRequest(req.body, expire, ctx, lr)) {
        return SendError(res, 400, "bad_request", *problem);
      }
      const Remedy remedy =
          RemedyLeak(ctx.masters[lr.master], lr.key,
                     expire ? LeakAction::kExpire : LeakAction::kDelete, lr.ttl_ms,
                     ctx.action_timeout);
      const std::string result(RemedyResultName(remedy.result));
      ctx.metrics->CountAdminAction(name, result);
      Audit(ctx, Severity::kWarning,
            fmt::format("{} master={} key={}{} by {}: {} ({})", name,
                        ctx.masters[lr.master].Display(), Quote(lr.key),
                        expire ? " ttl_ms=" + std::to_string(lr.ttl_ms) : "", Who(req), result,
                        remedy.message));
      if (remedy.result == RemedyResult::kDone && ctx.scanner) {
        ctx.scanner->Forget(lr.master, lr.key);
      }
      switch (remedy.result) {
        case RemedyResult::kDone:
          return SendJson(res, 200, {{"ok", true}, {"result", result}, {"message", remedy.message}});
        case RemedyResult::kStale:
          return SendError(res, 409, "stale", remedy.message);
        case RemedyResult::kError:
          return SendError(res, 502, "master_error", remedy.message);
      }
    };
  };
  s.Post("/api/v1/leaks/expire", action("expire_key", leak_action("expire_key", true)));
  s.Post("/api/v1/leaks/delete", action("delete_key", leak_action("delete_key", false)));
  s.Post("/api/v1/scan", action("rescan", [&ctx](const httplib::Request& req,
                                                 httplib::Response& res) {
    if (!ctx.scanner) {
      ctx.metrics->CountAdminAction("rescan", "error");
      return SendError(res, 409, "scanner_off", "the scanner is off (scan_interval_ms = 0)");
    }
    ctx.scanner->Rescan();
    ctx.metrics->CountAdminAction("rescan", "done");
    Audit(ctx, Severity::kInfo, "rescan by " + Who(req));
    SendJson(res, 202, {{"ok", true}, {"result", "started"}});
  }));

  s.Post("/api/v1/locks/release", action("force_release", [&ctx](const httplib::Request& req,
                                                                  httplib::Response& res) {
    ordered_json body;
    try {
      body = ordered_json::parse(req.body);
    } catch (const std::exception&) {
      return SendError(res, 400, "bad_request", "the body must be a JSON object");
    }
    if (!body.is_object() || body.size() != 1 || !body.contains("resource") ||
        !body["resource"].is_string()) {
      return SendError(res, 400, "bad_request",
                       "the body must be {\"resource\": \"<name>\"} and nothing else");
    }
    const std::string resource = body["resource"];
    if (auto problem = ResourceNameProblem(resource)) {
      return SendError(res, 400, "bad_request", "\"resource\": " + *problem);
    }
    auto outcome = ctx.revoke ? ctx.revoke(resource, ctx.action_timeout) : std::nullopt;
    const std::string result = !outcome ? "error" : outcome->held ? "done" : "stale";
    ctx.metrics->CountAdminAction("force_release", result);
    Audit(ctx, Severity::kWarning,
          fmt::format("force_release resource={} by {}: {}{}", Quote(resource), Who(req), result,
                      outcome && outcome->held
                          ? " (holder session " + std::to_string(outcome->session) + " pid " +
                                std::to_string(outcome->pid) + "; key deleted on " +
                                std::to_string(outcome->deleted) + " of " +
                                std::to_string(outcome->masters) + " masters)"
                          : ""));
    if (!outcome) {
      return SendError(res, 503, "unavailable", "the agent did not answer in time (stopping?)");
    }
    if (!outcome->held) {
      return SendError(res, 404, "not_held", "no lock on this resource is held through this agent");
    }
    SendJson(res, 200, {{"ok", true},
                        {"result", "done"},
                        {"resource", resource},
                        {"session", outcome->session},
                        {"pid", outcome->pid},
                        {"uid", outcome->uid},
                        {"deleted_on", outcome->deleted},
                        {"masters", outcome->masters}});
  }));

  s.set_error_handler([&ctx](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler's own error
    if (res.status == 404) return SendError(res, 404, "not_found", "no such endpoint");
    if (res.status == 413 || res.status == 411) {  // refused on its headers, the body unread
      ctx.metrics->CountAdminRefusal("too_large");
      res.set_header("Connection", "close");
      return SendError(res, res.status, "bad_request",
                       res.status == 411
                           ? "a request body needs a Content-Length (a chunked one is refused)"
                           : "the body is larger than " + BytesText(ctx.max_body_bytes) +
                                 " (admin_max_body_bytes)");
    }
    SendError(res, res.status, "bad_request",
              "malformed HTTP request (HTTP " + std::to_string(res.status) +
                  "); a POST needs a Content-Length");
  });
  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res,
                             std::exception_ptr ep) {
    std::string what = "unknown";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("admin: {} {} failed: {}", req.method, req.path, what);
    SendError(res, 500, "internal", "internal error; see the agent log");
  });
}

}  // namespace lw
