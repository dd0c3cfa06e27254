#pragma once
// What the fleet writes on the masters, and how it is read back: the agent registry (one entry
// per running agent, kept alive by its heartbeat), each agent's holder report (who holds and
// who waits through it: never a token), and the value of a lock key, which names the agent
// that holds it. Pure logic: names, encoding and decoding, no I/O. docs/fleet.md has the layout.
//
// Everything read from a master is untrusted input (any client with write access to the
// masters can write these keys): Decode* validate types and bound sizes and return nullopt
// rather than trust a malformed entry.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/hold.h"
#include "core/lock_kind.h"
#include "protocol/hold_json.h"

namespace lw::fleet {

// Every fleet key and channel starts with this. Config validation keeps key_prefix and
// fence_prefix apart from it, so the leak scanner and the fleet table never take one for a lock.
inline constexpr std::string_view kNamespace = "lockwarden:";

// ZSET member = agent id, score = unix ms at which its entry expires (as the agent's clock
// says). An index only, so that readers need no SCAN: an id counts once its AgentKey exists.
// Every heartbeat sets its TTL to 10 minutes: it goes once no agent runs.
std::string AgentsIndexKey();                      // "lockwarden:agents"
std::string AgentKey(std::string_view agent_id);   // "lockwarden:agent:<id>", AgentRecord JSON
std::string HoldersKey(std::string_view agent_id); // "lockwarden:holders:<id>", HolderReport JSON
// The channel an agent listens on for revokes of locks held through it (RevokeOrder JSON).
std::string RevokeChannel(std::string_view agent_id);  // "lockwarden:revoke:<id>"
// ZSET like the index, of the agents that mark read holds (docs/safety.md §7, "Marked
// readers"); an agent in the index and not here is taken to leave them unmarked.
std::string MarkingIndexKey();                     // "lockwarden:agents:marking"
// Held (SET NX PX, compare-and-pexpire) by the one agent that exports fleet totals.
std::string ReporterKey();                         // "lockwarden:reporter"

// A fleet-unique id for one run of an agent: 16 lowercase hex characters from the kernel
// CSPRNG. A restarted agent is a new agent: the locks of the old run have no live holder.
std::string NewAgentId();
bool IsWellFormedAgentId(std::string_view id);

// The value of a lock key on the masters: "<agent id>:<token>". Whoever reads the key learns
// which agent holds it; the token part identifies the grant (it is not secret from anyone who
// can read the masters, who could delete the key anyway: docs/security.md).
std::string LockValue(std::string_view agent_id, std::string_view token);
// The holder agent's id of a lock value; nullopt when the value is not of that form (written
// by something else, or by an agent older than the fleet registry).
std::optional<std::string> AgentOfValue(std::string_view value);
// A short name of one hold for operators and revokes: 16 lowercase hex characters of a 64-bit
// FNV-1a digest of its value. Read holds of one agent share their agent id, so the page and a
// revoke tell them apart by this; the token cannot be learned from it.
std::string HoldId(std::string_view value);
bool IsWellFormedHoldId(std::string_view id);

// The settings the safety argument (docs/safety.md) assumes every agent on the masters shares.
struct SafetySettings {
  std::string key_prefix;
  int64_t max_ttl_ms = 0;
  double drift_factor = 0;
  bool restart_quarantine = true;
  std::string fence_prefix;
  int64_t fence_quorum = 0;
  bool operator==(const SafetySettings&) const = default;
};

// One agent as it announces itself.
struct AgentRecord {
  std::string id;
  std::string name;  // readable; agent_name, default the host name
  std::string host;
  int pid = 0;
  std::string version;
  std::string admin_url;  // "" when the admin server is off
  int64_t started_unix_ms = 0;
  int64_t heartbeat_unix_ms = 0;  // when this entry was written (the agent's clock)
  int64_t heartbeat_ttl_ms = 0;   // the entry expires this long after it was written
  SafetySettings settings;
};

// An acquire queued at an agent. At most kMaxPublishedWaiters per report, the oldest first.
struct WaiterDetail {
  std::string resource;
  int pid = -1;
  int uid = -1;
  std::string cmdline;
  int64_t since_unix_ms = 0;
  // What it asks for, as a hold's mode (absent from the record: exclusive; no permit index).
  HoldMode mode = HoldMode::kExclusive;
  int permits = 0;
  int actor_pid = -1;  // Peer::actor_pid
};

struct HolderReport {
  int64_t unix_ms = 0;  // when it was taken
  uint64_t locks_total = 0;    // locks held through the agent (locks may list fewer)
  uint64_t waiters_total = 0;  // acquires queued at the agent (waiters may list fewer)
  // Locks held through the agent (core/hold.h; protocol/hold_json.h writes and reads them:
  // fields an older agent does not write read as an exclusive hold, not detached). At most
  // kMaxPublishedLocks: the stuck first, then the longest held (ResourceTable::ListedLocks); a
  // command line is "" when share_cmdline is off, at most kMaxCmdlineBytes.
  std::vector<Hold> locks;
  std::vector<WaiterDetail> waiters;
};

inline constexpr size_t kMaxPublishedLocks = 200;
inline constexpr size_t kMaxPublishedWaiters = 200;
inline constexpr size_t kMaxCmdlineBytes = protocol::kMaxReportedCmdlineBytes;
inline constexpr size_t kMaxEntryBytes = 256 * 1024;  // a larger entry read back is refused

// A revoke sent by the agent of an operator to the holder's agent: drop the grant whose key
// `key` holds `value`, telling its client `lost` with reason "revoked".
struct RevokeOrder {
  std::string key;
  std::string value;
  std::string by;  // who asked: "<agent name> (<remote address>)", for the holder's log
};

std::string Encode(const AgentRecord& r);
std::string Encode(const HolderReport& r);
std::string Encode(const RevokeOrder& r);
std::optional<AgentRecord> DecodeAgentRecord(std::string_view text);
std::optional<HolderReport> DecodeHolderReport(std::string_view text);
std::optional<RevokeOrder> DecodeRevokeOrder(std::string_view text);

}  // namespace lw::fleet
