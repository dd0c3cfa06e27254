#pragma once
// Revoke a hold anywhere in the fleet, from any agent (an operator's action; blocking, for an
// admin thread). The hold is one of the resource's (core/lock_kind.h): its exclusive hold at
// P R, a permit's key, or a reader (a member of its readers set). Its value names the holder's
// agent:
// - its agent is in the registry: a RevokeOrder naming the hold's key and value is published on
//   its RevokeChannel on every master; that agent revokes the grant (LockEngine::RevokeGrant:
//   its client gets `lost` with reason "revoked", the key or member is removed with the release
//   announcement on the resource's channel, so the next waiter anywhere tries at once). We wait
//   up to `wait` for the hold to be gone from a quorum;
// - nobody received the order (the agent is gone, or not subscribed), or the hold is still
//   there when the wait ends: it is compare-and-removed with the value read on every master as
//   its part's row says (core/key_parts.h: a key: DEL if it holds the value, and for P R also
//   the election's leader record that names the value; a reader: ZREM of the member),
//   announcing the release.
// The value compared is the one read at the start: a hold granted again meanwhile is untouched.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/master_address.h"
#include "fleet/records.h"

namespace lw::fleet {

struct RevokeRequest {
  std::vector<MasterAddress> masters;
  std::string key_prefix;
  std::string resource;
  // Which hold: `hold` (HoldId of its value, as the fleet view shows it) names any one;
  // `permit` a semaphore's permit. Neither: the exclusive hold at P R.
  std::optional<int> permit;
  std::string hold;
  std::string by;  // the operator's agent and remote address, for the holder's log
  std::chrono::milliseconds wait{2'000};
  std::chrono::milliseconds connect_timeout{1'000};
  std::chrono::milliseconds command_timeout{1'000};
};

struct RevokeResult {
  enum class How {
    kNotHeld,        // no such hold on a quorum of masters: nothing to revoke
    kByHolderAgent,  // the holder's agent revoked it
    kDeleted,        // compare-and-deleted here (the holder's agent gone or silent)
    kFailed,         // masters unreachable: see error
  };
  How how = How::kFailed;
  std::string agent_id;  // the holder's
  int receivers = 0;     // subscribers the order reached (summed over masters)
  int deleted = 0;       // masters where this call deleted the key (or removed the reader)
  HoldMode mode = HoldMode::kExclusive;  // of the hold revoked
  int permit = -1;
  int masters_read = 0;
  std::string error;
};
std::string_view HowName(RevokeResult::How how);  // "not_held", "holder_agent", "deleted", "failed"

RevokeResult RevokeInFleet(const RevokeRequest& request);

}  // namespace lw::fleet
