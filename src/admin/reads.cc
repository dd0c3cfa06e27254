#include <chrono>
#include <string>

#include "admin/answers.h"
#include "admin/handlers.h"
#include "admin/runbooks_page.h"

namespace lw {

void ServeMetrics(const AdminContext& ctx, const httplib::Request&, httplib::Response& res) {
  res.set_content(ctx.metrics->Serialize(), "text/plain; version=0.0.4; charset=utf-8");
}

void ServeHealth(const AdminContext& ctx, const httplib::Request&, httplib::Response& res) {
  auto snap = ctx.snapshots->Latest();
  const auto age = snap ? std::chrono::steady_clock::now() - snap->taken
                        : std::chrono::steady_clock::duration::max();
  if (snap && age < ctx.stale_after) {
    res.set_content("ok\n", "text/plain");
    return;
  }
  res.status = 503;
  if (!snap) return res.set_content("starting\n", "text/plain");
  const auto age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(age).count();
  res.set_content("event loop stalled: no state published for " + std::to_string(age_ms) + " ms\n",
                  "text/plain");
}

void ServeReadiness(const AdminContext& ctx, const httplib::Request&, httplib::Response& res) {
  auto snap = ctx.snapshots->Latest();
  if (!snap) {
    res.status = 503;
    res.set_content("not ready: starting\n", "text/plain");
    return;
  }
  const Readiness readiness = ReadinessOf(*snap);
  if (!readiness.ready) res.status = 503;
  res.set_content((readiness.ready ? "ready: " : "not ready: ") + readiness.reason + "\n",
                  "text/plain");
}

void ServeLeaks(const AdminContext& ctx, const httplib::Request&, httplib::Response& res) {
  auto report = ctx.scanner ? ctx.scanner->Latest() : nullptr;
  SendJson(res, 200, LeaksView(report.get(), ctx.scanner ? ctx.scanner->interval().count() : 0));
}

namespace {

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

}  // namespace

void ServeRunbooks(const httplib::Request&, httplib::Response& res) {
  PageHeaders(res);
  res.set_content(RunbooksPage(), "text/html; charset=utf-8");
}

void ServeAsset(const WebAsset& asset, const httplib::Request& req, httplib::Response& res) {
  PageHeaders(res);
  res.set_header("ETag", std::string(asset.etag));
  if (req.get_header_value("If-None-Match") == asset.etag) {
    res.status = 304;
    return;
  }
  res.set_content(asset.body.data(), asset.body.size(), std::string(asset.content_type));
}

}  // namespace lw
