// The fleet endpoints: GET /api/v1/fleet, GET /api/v1/fleet/who and POST /api/v1/fleet/revoke.
// Reads wait for the fleet reader's view (at most kFleetWait); a revoke runs the blocking
// fleet::RevokeInFleet on this HTTP thread (bounded by its own wait) and is audited.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <variant>

#include "admin/answers.h"
#include "admin/fleet_views.h"
#include "admin/handlers.h"
#include "core/unix_time.h"

namespace lw {
namespace {

// How long a read waits for a view newer than kFleetFreshMs (the page polls every ~5 s and the
// reader reads at most once per refresh period); past it the answer is the latest view, whose
// "age_ms" says how old it is. Bounded so that an answer comes within 2 s whatever the fleet.
constexpr auto kFleetWait = std::chrono::milliseconds(1'500);
constexpr int64_t kFleetFreshMs = 5'000;
// A snapshot of this agent's locks at most this old fills in its own rows; an answer waits at
// most kLocalWait for one (within the 2 s an answer takes at most).
constexpr auto kLocalFresh = std::chrono::seconds(2);
constexpr auto kLocalWait = std::chrono::milliseconds(250);

const Failure& FleetOff() {
  static const Failure off{ErrorCode::kNotFound,
                           "fleet presence is off (heartbeat_ttl_ms = 0): this agent neither "
                           "announces itself nor reads the fleet"};
  return off;
}

// The fleet view, or the failure to answer with (fleet off: 404; no view in time: 503).
// `prefix`: the resources whose rows the answer lists.
std::variant<std::shared_ptr<const fleet::FleetView>, Failure> ReadFleet(const AdminContext& ctx,
                                                                         const std::string& prefix) {
  if (ctx.fleet == nullptr) return FleetOff();
  auto view = ctx.fleet->View(UnixMsNow() - kFleetFreshMs, kFleetWait, prefix);
  if (!view) {
    return Failure{ErrorCode::kUnavailable,
                   "no fleet view yet: the first read of the masters has not ended within 1.5 s "
                   "(they are slow or unreachable, or the keyspace is large); try again"};
  }
  return view;
}

// This agent's own holds, when a row of the view is this agent's and its report did not list
// it yet (acquired since the last heartbeat): from the loop's latest detailed snapshot, waiting
// at most kLocalWait for one (the page keeps them coming; none: the rows stay as reported).
LocalHolds LocalHoldsFor(const AdminContext& ctx, const fleet::FleetView& view) {
  const bool wanted = std::any_of(view.locks.begin(), view.locks.end(), [&](const auto& l) {
    return !l.detail && l.agent_id == ctx.self.id;
  });
  if (!wanted || ctx.snapshots == nullptr) return {};
  const auto now = SnapshotBox::Clock::now();
  auto snapshot = ctx.snapshots->LatestDetailed(now - kLocalFresh, kLocalWait);
  LocalHolds out;
  if (!snapshot) return out;
  for (size_t i = 0; i < snapshot->locks.size() && i < snapshot->listed_grants.size(); ++i) {
    out.emplace(snapshot->listed_grants[i], static_cast<const Hold&>(snapshot->locks[i]));
  }
  return out;
}

// The body read from `view`, with "age_ms": how long ago that read ended, as of this answer,
// and "sweep": how far the next view's sweep is (null when none is under way).
void SendFleetJson(const AdminContext& ctx, httplib::Response& res, nlohmann::ordered_json body,
                   const fleet::FleetView& view) {
  body["age_ms"] = std::max<int64_t>(0, UnixMsNow() - view.read_unix_ms);
  const fleet::SweepProgress sweep = ctx.fleet->Progress();
  body["sweep"] = nullptr;
  if (sweep.active) {
    body["sweep"] = {{"started_at_ms", sweep.started_unix_ms},
                     {"reads", sweep.reads},
                     {"keys_walked", sweep.keys_walked},
                     {"master", sweep.master},
                     {"masters", sweep.masters}};
  }
  res.set_header("Cache-Control", "no-store");
  SendJson(res, 200, body);
}

// "holder_agent (agent 0123456789abcdef; 2 receivers; deleted on 0; 5 masters read)".
std::string RevokeText(const fleet::RevokeResult& r) {
  std::string text(fleet::HowName(r.how));
  text += " (agent " + (r.agent_id.empty() ? std::string("?") : r.agent_id) + "; " +
          std::to_string(r.receivers) + " receivers; deleted on " + std::to_string(r.deleted) +
          "; " + std::to_string(r.masters_read) + " masters read";
  if (!r.error.empty()) text += "; " + r.error;
  return text + ")";
}

ActionResult ResultOf(const fleet::RevokeResult& r) {
  switch (r.how) {
    case fleet::RevokeResult::How::kByHolderAgent:
    case fleet::RevokeResult::How::kDeleted:
      return ActionResult::kDone;
    case fleet::RevokeResult::How::kNotHeld:
      return ActionResult::kStale;
    case fleet::RevokeResult::How::kFailed:
      break;
  }
  return ActionResult::kError;
}

}  // namespace

void ServeFleet(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto query = ParseFleetQuery(req.get_param_value("prefix"), req.get_param_value("limit"));
  if (auto* failure = std::get_if<Failure>(&query)) return SendFailure(res, *failure);
  auto view = ReadFleet(ctx, std::get<FleetQuery>(query).prefix);
  if (auto* failure = std::get_if<Failure>(&view)) return SendFailure(res, *failure);
  const fleet::FleetView& v = *std::get<0>(view);
  SendFleetJson(ctx, res,
                FleetJson(v, ctx.self, std::get<FleetQuery>(query), LocalHoldsFor(ctx, v)), v);
}

void ServeFleetWho(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto resource = ParseWhoQuery(req.get_param_value("resource"));
  if (auto* failure = std::get_if<Failure>(&resource)) return SendFailure(res, *failure);
  auto view = ReadFleet(ctx, std::get<std::string>(resource));
  if (auto* failure = std::get_if<Failure>(&view)) return SendFailure(res, *failure);
  const fleet::FleetView& v = *std::get<0>(view);
  SendFleetJson(ctx, res,
                WhoJson(v, ctx.self, std::get<std::string>(resource), LocalHoldsFor(ctx, v)), v);
}

void RevokeFleetLock(const AdminContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto parsed = ParseFleetRevokeBody(req.body);
  if (auto* failure = std::get_if<Failure>(&parsed)) return SendFailure(res, *failure);
  fleet::RevokeRequest request = std::get<fleet::RevokeRequest>(std::move(parsed));
  const std::string resource = request.resource;
  std::string target;  // " permit=2", " hold=..." for the audit line
  if (request.permit) target += " permit=" + std::to_string(*request.permit);
  if (!request.hold.empty()) target += " hold=" + request.hold;
  if (!ctx.fleet_revoke) {
    ctx.stats->Count(AdminAction::kFleetRevoke, ActionResult::kError);
    return SendFailure(res, FleetOff());
  }
  // The holder's agent logs who asked: this agent, and the operator's address.
  const std::string by = (ctx.self.name.empty() ? std::string("agent") : ctx.self.name) + " (" +
                         req.remote_addr + ")";
  request.by = by;
  const fleet::RevokeResult result = ctx.fleet_revoke(std::move(request));
  ctx.stats->Count(AdminAction::kFleetRevoke, ResultOf(result));
  Audit(ctx, Severity::kWarning,
        fmt::format("fleet_revoke resource={}{} by {}: {}", Quote(resource), target, Who(req),
                    RevokeText(result)));
  nlohmann::ordered_json body = RevokeJson(result);
  body["resource"] = resource;
  switch (result.how) {
    case fleet::RevokeResult::How::kByHolderAgent:
    case fleet::RevokeResult::How::kDeleted: {
      nlohmann::ordered_json ok = {{"ok", true}, {"result", "done"}};
      ok.update(body);
      return SendJson(res, 200, ok);
    }
    case fleet::RevokeResult::How::kNotHeld: {
      nlohmann::ordered_json out = ErrorView(
          {ErrorCode::kNotHeld, "no such hold of this resource (its exclusive hold, or the "
                                "permit or hold named) is held on a quorum of masters"});
      out.update(body);
      return SendJson(res, HttpStatusOf(ErrorCode::kNotHeld), out);
    }
    case fleet::RevokeResult::How::kFailed:
      break;
  }
  nlohmann::ordered_json out = ErrorView(
      {ErrorCode::kMasterError,
       result.error.empty() ? "the masters could not be read or written" : result.error});
  out.update(body);
  SendJson(res, HttpStatusOf(ErrorCode::kMasterError), out);
}

}  // namespace lw
