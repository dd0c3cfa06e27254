#pragma once
// The admin endpoints that need nothing but the context (the state endpoint, which keeps a
// render cache, is AdminServer's own). Each answers one request on an HTTP thread; the route
// table (admin_server.cc) says which path, which method and who may call it.
//
// Actions run only once the action gate let the request through (token, same origin); each
// counts its result in AdminStats and writes an audit line (log and recent events).

#include <httplib.h>

#include <string>
#include <variant>

#include "admin/admin_context.h"
#include "admin/web_assets.h"

namespace lw {

// A handler over the context alone.
using ContextHandler = void (*)(const AdminContext&, const httplib::Request&, httplib::Response&);

// Reads (reads.cc).
void ServeMetrics(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res);
void ServeHealth(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res);
void ServeReadiness(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res);
void ServeLeaks(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res);
// The runbooks page (runbooks_page.h), with the page's security headers.
void ServeRunbooks(const httplib::Request& req, httplib::Response& res);
// One file of the page, with its ETag and the page's security headers.
void ServeAsset(const WebAsset& asset, const httplib::Request& req, httplib::Response& res);

// The fleet (fleet.cc): the fleet table, one resource's row, and a revoke through any agent.
void ServeFleet(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res);
void ServeFleetWho(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res);
void RevokeFleetLock(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res);

// The resource named by an action's body ({"resource": "<name>"} and nothing else), or why the
// body is refused (actions.cc).
std::variant<std::string, Failure> ParseResourceBody(const std::string& body);

// Actions (actions.cc).
void ExpireLeakedKey(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res);
void DeleteLeakedKey(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res);
void StartRescan(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res);
void ForceRelease(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res);

// One audit line in the log, and the same words in the page's recent events.
void Audit(const AdminContext& ctx, Severity severity, const std::string& what);

}  // namespace lw
