// TEMPORARY (issue 17, admin branch): stand-ins for fleet room functions whose implementations
// land on the fleet branch, so that this branch links. The lead deletes this file at merge.

#include "fleet/reader.h"
#include "fleet/revoke.h"
#include "fleet/view.h"

namespace lw::fleet {

std::string_view HolderStateName(HolderState s) {
  switch (s) {
    case HolderState::kLive:
      return "live";
    case HolderState::kGone:
      return "gone";
    case HolderState::kUnknown:
      break;
  }
  return "unknown";
}

std::string_view HowName(RevokeResult::How how) {
  switch (how) {
    case RevokeResult::How::kNotHeld:
      return "not_held";
    case RevokeResult::How::kByHolderAgent:
      return "holder_agent";
    case RevokeResult::How::kDeleted:
      return "deleted";
    case RevokeResult::How::kFailed:
      break;
  }
  return "failed";
}

std::vector<const FleetLock*> Filter(const FleetView& view, std::string_view prefix,
                                     size_t limit) {
  std::vector<const FleetLock*> out;
  for (const FleetLock& l : view.locks) {
    if (out.size() >= limit) break;
    if (l.resource.compare(0, prefix.size(), prefix) == 0) out.push_back(&l);
  }
  return out;
}

std::shared_ptr<const FleetView> FleetReader::View(int64_t, std::chrono::milliseconds) {
  return nullptr;
}

}  // namespace lw::fleet
