#include <spdlog/spdlog.h>

#include <optional>
#include <string>
#include <variant>

#include "admin/answers.h"
#include "admin/handlers.h"
#include "core/resource_name.h"
#include "core/unix_time.h"
#include "scan/remedy.h"

namespace lw {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr size_t kMaxKeyBytes = 4096;


struct LeakRequest {
  size_t master = 0;
  std::string key;
  int64_t ttl_ms = 0;
};

// The index of the master shown as `display` ("host:port"), if it is one of this agent's.
std::optional<size_t> MasterIndex(const AdminContext& ctx, const std::string& display) {
  for (size_t i = 0; i < ctx.masters.size(); ++i) {
    if (ctx.masters[i].Display() == display) return i;
  }
  return std::nullopt;
}

// Validates the JSON body of a leak action: the request, or the problem for people.
std::variant<LeakRequest, std::string> ParseLeakRequest(const std::string& body, bool expire,
                                                        const AdminContext& ctx) {
  ordered_json j = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
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
  LeakRequest out;
  const std::string master = j["master"];
  const auto index = MasterIndex(ctx, master);
  if (!index) return "\"master\": " + master + " is not one of this agent's masters";
  out.master = *index;
  if (!j.contains("key") || !j["key"].is_string() || j["key"].get<std::string>().empty()) {
    return "\"key\" (non-empty string) is required";
  }
  out.key = j["key"];
  if (out.key.size() > kMaxKeyBytes) return "\"key\" is longer than 4096 bytes";
  if (!expire) return out;
  if (!j.contains("ttl_ms") || !j["ttl_ms"].is_number_integer()) {
    return "\"ttl_ms\" (integer, milliseconds) is required";
  }
  out.ttl_ms = j["ttl_ms"];
  if (out.ttl_ms < 1 || out.ttl_ms > ctx.max_ttl_ms) {
    return "\"ttl_ms\" must be between 1 and max_ttl_ms (" + std::to_string(ctx.max_ttl_ms) + ")";
  }
  return out;
}

ActionResult ResultOf(RemedyResult result) {
  switch (result) {
    case RemedyResult::kDone:
      return ActionResult::kDone;
    case RemedyResult::kStale:
      return ActionResult::kStale;
    case RemedyResult::kError:
      break;
  }
  return ActionResult::kError;
}

// Expires or deletes a still TTL-less key on one master, and says what came of it.
void RemedyLeakedKey(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res,
                     AdminAction action) {
  const bool expire = action == AdminAction::kExpireKey;
  auto parsed = ParseLeakRequest(req.body, expire, ctx);
  if (auto* problem = std::get_if<std::string>(&parsed)) {
    return SendFailure(res, BadRequest(std::move(*problem)));
  }
  const LeakRequest& lr = std::get<LeakRequest>(parsed);
  const MasterAddress& master = ctx.masters[lr.master];
  const Remedy remedy =
      RemedyLeak(master, lr.key, expire ? LeakAction::kExpire : LeakAction::kDelete, lr.ttl_ms,
                 ctx.action_timeout);
  const std::string result(RemedyResultName(remedy.result));
  const std::string_view name = kAdminActionNames[static_cast<size_t>(action)];
  ctx.stats->Count(action, ResultOf(remedy.result));
  Audit(ctx, Severity::kWarning,
        fmt::format("{} master={} key={}{} by {}: {} ({})", name, master.Display(), Quote(lr.key),
                    expire ? " ttl_ms=" + std::to_string(lr.ttl_ms) : "", Who(req), result,
                    remedy.message));
  switch (remedy.result) {
    case RemedyResult::kDone:
      if (ctx.scanner) ctx.scanner->Forget(lr.master, lr.key);
      return SendJson(res, 200, {{"ok", true}, {"result", result}, {"message", remedy.message}});
    case RemedyResult::kStale:
      return SendFailure(res, {ErrorCode::kStale, remedy.message});
    case RemedyResult::kError:
      return SendFailure(res, {ErrorCode::kMasterError, remedy.message});
  }
}

}  // namespace

std::variant<std::string, Failure> ParseResourceBody(const std::string& body) {
  const ordered_json j = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return BadRequest("the body must be a JSON object");
  if (!j.is_object() || j.size() != 1 || !j.contains("resource") || !j["resource"].is_string()) {
    return BadRequest("the body must be {\"resource\": \"<name>\"} and nothing else");
  }
  std::string resource = j["resource"];
  if (auto problem = ResourceNameProblem(resource)) {
    return BadRequest("\"resource\": " + *problem);
  }
  return resource;
}

namespace {

// " (holder session 7 pid 42; key deleted on 3 of 3 masters)", or "" when nothing was held.
std::string HolderText(const std::optional<RevokeOutcome>& outcome) {
  if (!outcome || !outcome->held) return "";
  return " (holder session " + std::to_string(outcome->session) + " pid " +
         std::to_string(outcome->pid) + "; key deleted on " + std::to_string(outcome->deleted) +
         " of " + std::to_string(outcome->masters) + " masters)";
}

}  // namespace

void Audit(const AdminContext& ctx, Severity severity, const std::string& what) {
  spdlog::log(severity == Severity::kInfo ? spdlog::level::info : spdlog::level::warn, "audit: {}",
              what);
  if (ctx.events) ctx.events->Add({UnixMsNow(), "admin", severity, what, 1});
}

void ExpireLeakedKey(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res) {
  RemedyLeakedKey(ctx, req, res, AdminAction::kExpireKey);
}

void DeleteLeakedKey(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res) {
  RemedyLeakedKey(ctx, req, res, AdminAction::kDeleteKey);
}

void StartRescan(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res) {
  if (!ctx.scanner) {
    ctx.stats->Count(AdminAction::kRescan, ActionResult::kError);
    return SendFailure(res, {ErrorCode::kScannerOff, "the scanner is off (scan_interval_ms = 0)"});
  }
  ctx.scanner->Rescan();
  ctx.stats->Count(AdminAction::kRescan, ActionResult::kDone);
  Audit(ctx, Severity::kInfo, "rescan by " + Who(req));
  SendJson(res, 202, {{"ok", true}, {"result", "started"}});
}

void ForceRelease(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto parsed = ParseResourceBody(req.body);
  if (auto* failure = std::get_if<Failure>(&parsed)) return SendFailure(res, *failure);
  const std::string& resource = std::get<std::string>(parsed);
  auto outcome = ctx.revoke ? ctx.revoke(resource, ctx.action_timeout) : std::nullopt;
  const ActionResult result = !outcome        ? ActionResult::kError
                              : outcome->held ? ActionResult::kDone
                                              : ActionResult::kStale;
  ctx.stats->Count(AdminAction::kForceRelease, result);
  Audit(ctx, Severity::kWarning,
        fmt::format("force_release resource={} by {}: {}{}", Quote(resource), Who(req),
                    kActionResultNames[static_cast<size_t>(result)], HolderText(outcome)));
  if (!outcome) {
    return SendFailure(res,
                       {ErrorCode::kUnavailable, "the agent did not answer in time (stopping?)"});
  }
  if (!outcome->held) {
    return SendFailure(
        res, {ErrorCode::kNotHeld, "no lock on this resource is held through this agent"});
  }
  SendJson(res, 200,
           {{"ok", true},
            {"result", "done"},
            {"resource", resource},
            {"session", outcome->session},
            {"pid", outcome->pid},
            {"uid", outcome->uid},
            {"deleted_on", outcome->deleted},
            {"masters", outcome->masters}});
}

}  // namespace lw
