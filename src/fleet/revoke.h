#pragma once
// Revoke a lock held anywhere in the fleet, from any agent (an operator's action; blocking, for
// an admin thread). The lock key is read on every master; the value names the holder's agent:
// - its agent is in the registry: a RevokeOrder is published on its RevokeChannel on every
//   master; that agent revokes the grant (its client gets `lost` with reason "revoked", the key
//   is deleted with the release announcement, so the next waiter anywhere tries at once). We
//   wait up to `wait` for the key to be gone from a quorum;
// - nobody received the order (the agent is gone, or not subscribed), or the key is still there
//   when the wait ends: the key is compare-and-deleted with the value read (kDeleteIfHeld, which
//   announces the release) on every master.
// The value compared is the one read at the start: a lock granted again meanwhile is untouched.

#include <chrono>
#include <string>
#include <vector>

#include "core/master_address.h"
#include "fleet/records.h"

namespace lw::fleet {

struct RevokeRequest {
  std::vector<MasterAddress> masters;
  std::string key_prefix;
  std::string resource;
  std::string by;  // the operator's agent and remote address, for the holder's log
  std::chrono::milliseconds wait{2'000};
  std::chrono::milliseconds connect_timeout{1'000};
  std::chrono::milliseconds command_timeout{1'000};
};

struct RevokeResult {
  enum class How {
    kNotHeld,        // no value on a quorum of masters... nothing to revoke
    kByHolderAgent,  // the holder's agent revoked it
    kDeleted,        // compare-and-deleted here (the holder's agent gone or silent)
    kFailed,         // masters unreachable: see error
  };
  How how = How::kFailed;
  std::string agent_id;  // the holder's
  int receivers = 0;     // subscribers the order reached (summed over masters)
  int deleted = 0;       // masters where this call deleted the key
  int masters_read = 0;
  std::string error;
};
std::string_view HowName(RevokeResult::How how);  // "not_held", "holder_agent", "deleted", "failed"

RevokeResult RevokeInFleet(const RevokeRequest& request);

}  // namespace lw::fleet
