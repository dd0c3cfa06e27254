#pragma once
// What the admin HTTP server counts (docs/metrics.md): the operator actions it ran and the
// requests and connections it refused. Bumped where the action ends or the refusal is decided.

#include <array>
#include <string_view>

#include "stats/stats.h"

namespace lw {

// kFleetRevoke: a lock held through any agent of the fleet (POST /api/v1/fleet/revoke).
enum class AdminAction { kExpireKey, kDeleteKey, kRescan, kForceRelease, kFleetRevoke, kCount };
inline constexpr std::array<std::string_view, 5> kAdminActionNames = {
    "expire_key", "delete_key", "rescan", "force_release", "fleet_revoke"};

// done; refused (no or wrong token, cross-site, actions disabled); stale (nothing to act on any
// more); error.
enum class ActionResult { kDone, kRefused, kStale, kError, kCount };
inline constexpr std::array<std::string_view, 4> kActionResultNames = {"done", "refused", "stale",
                                                                       "error"};

// unauthorized (401: no or wrong token, for a read or an action), forbidden (403: cross-site
// action, actions disabled), too_large (413, 411, or a request cut past its size),
// too_many_connections (503 at accept, or a waiting connection ended to make room), timeout (a
// request or its response missed its deadline).
enum class AdminRefusal {
  kUnauthorized,
  kForbidden,
  kTooLarge,
  kTooManyConnections,
  kTimeout,
  kCount
};
inline constexpr std::array<std::string_view, 5> kAdminRefusalNames = {
    "unauthorized", "forbidden", "too_large", "too_many_connections", "timeout"};

struct AdminStats {
  using ResultCounters = stats::ByEnum<stats::Counter, ActionResult>;

  explicit AdminStats(stats::Registry& r) : r_(r) {}
  stats::Registry& r_;
  // Every action x result series exists from the start, so rate() and alerts see the first one.
  stats::ByEnum<ResultCounters, AdminAction> actions{
      r_,
      "lockwarden_admin_actions_total",
      "Operator actions on the admin API, by action and result.",
      "action",
      kAdminActionNames,
      {},
      "result",
      kActionResultNames};
  stats::ByEnum<stats::Counter, AdminRefusal> refusals{
      r_, "lockwarden_admin_refusals_total",
      "Requests and connections the admin HTTP server refused, by reason.", "reason",
      kAdminRefusalNames};

  void Count(AdminAction action, ActionResult result) { actions[action][result].Inc(); }
  void Count(AdminRefusal reason) { refusals[reason].Inc(); }
};

}  // namespace lw
