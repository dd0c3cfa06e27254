#include "core/error_code.h"

#include <array>
#include <utility>

namespace lw {
namespace {
constexpr std::array<std::pair<ErrorCode, std::string_view>, 17> kNames{{
    {ErrorCode::kBadRequest, "bad_request"},
    {ErrorCode::kTimeout, "timeout"},
    {ErrorCode::kNoQuorum, "no_quorum"},
    {ErrorCode::kNotHeld, "not_held"},
    {ErrorCode::kTooMany, "too_many"},
    {ErrorCode::kForbidden, "forbidden"},
    {ErrorCode::kShuttingDown, "shutting_down"},
    {ErrorCode::kInternal, "internal"},
    {ErrorCode::kKindMismatch, "kind_mismatch"},
    {ErrorCode::kWouldDeadlock, "would_deadlock"},
    {ErrorCode::kUnauthorized, "unauthorized"},
    {ErrorCode::kNotFound, "not_found"},
    {ErrorCode::kStale, "stale"},
    {ErrorCode::kScannerOff, "scanner_off"},
    {ErrorCode::kMasterError, "master_error"},
    {ErrorCode::kUnavailable, "unavailable"},
    {ErrorCode::kStarting, "starting"},
}};
}  // namespace

std::string_view ErrorCodeName(ErrorCode code) {
  for (const auto& [c, name] : kNames) {
    if (c == code) return name;
  }
  return "internal";
}

std::optional<ErrorCode> ErrorCodeFromName(std::string_view name) {
  for (const auto& [c, n] : kNames) {
    if (n == name) return c;
  }
  return std::nullopt;
}

}  // namespace lw
