#pragma once
// The lockwarden wire protocol: one JSON object per line each way over a stream Unix socket.
// This room turns bytes into validated requests and results into bytes. It knows nothing of
// sockets, Redis or the engine; docs/protocol.md is its user-facing description.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/defaults.h"
#include "core/election_record.h"
#include "core/error_code.h"
#include "core/lock_view.h"

namespace lw::protocol {

// Every request type names its op and the fields it accepts (id and op included); the Op
// variant below is the one list of ops: the decoder's table and OpName derive from it, and the
// agent's LockService has one handler per alternative.
// The most resources one acquire takes at once ("resources").
inline constexpr size_t kMaxResourcesAtOnce = 16;

struct AcquireRequest {
  static constexpr std::string_view kName = "acquire";
  static constexpr std::string_view kFields[] = {"id",    "op",    "resource", "ttl_ms",
                                                 "wait_ms", "renew", "fence", "permits",
                                                 "shared", "detach", "owner", "reentrant",
                                                 "resources"};
  std::string resource;
  int64_t ttl_ms = 0;
  int64_t wait_ms = 0;
  bool renew = false;
  bool fence = false;  // also issue a fencing token (docs/safety.md)
  int permits = 0;      // > 0: a permit of a semaphore of that many (1..kMaxPermits)
  bool shared = false;  // a shared (read) hold; readers share, an exclusive hold excludes them
  // A detached lease: it survives this connection and ends by release (by token, from any
  // connection of its creator's uid or one the access rules allow) or by its ttl; never renewed.
  bool detach = false;
  // Who inside the connection asks (a thread, a task; 0: the connection itself). An acquire that
  // could only wait for a hold of the same connection and owner is refused (would_deadlock), or,
  // with `reentrant`, an exclusive one is taken again (its depth counts the acquires).
  uint64_t owner = 0;
  bool reentrant = false;
  // Several resources at once (2..kMaxResourcesAtOnce, distinct), all or none, in this order:
  // sorted bytewise (the canonical order every such acquire takes them in). Empty: `resource`.
  std::vector<std::string> resources;
  bool operator==(const AcquireRequest&) const = default;
};
struct ReleaseRequest {
  static constexpr std::string_view kName = "release";
  static constexpr std::string_view kFields[] = {"id", "op", "resource", "token"};
  std::string resource;
  std::string token;
  bool operator==(const ReleaseRequest&) const = default;
};
struct ExtendRequest {
  static constexpr std::string_view kName = "extend";
  static constexpr std::string_view kFields[] = {"id", "op", "resource", "token", "ttl_ms"};
  std::string resource;
  std::string token;
  int64_t ttl_ms = 0;
  bool operator==(const ExtendRequest&) const = default;
};
// Take over a hold granted through an earlier run of this agent (a restart, an upgrade, a
// crash) by its token, as an extend by ttl_ms would confirm it (docs/protocol.md "Resume").
// The kind fields say which hold, as the acquire asked and its grant answered.
struct ResumeRequest {
  static constexpr std::string_view kName = "resume";
  static constexpr std::string_view kFields[] = {"id",    "op",      "resource", "token",
                                                 "ttl_ms", "renew", "fence",    "permits",
                                                 "permit", "shared", "election", "owner",
                                                 "depth"};
  std::string resource;  // an election's name when `election`
  std::string token;
  int64_t ttl_ms = 0;
  bool renew = false;
  int64_t fence = 0;  // the grant's fence (0: none); carried, not checked; a leadership's term
  int permits = 0;    // > 0: a permit of a semaphore of that many
  int permit = -1;    // with permits: which permit the grant answered
  bool shared = false;
  bool election = false;  // a leadership (campaign's grant): fence is its term
  uint64_t owner = 0;     // as its acquire asked
  int depth = 1;          // a reentrant hold's depth as the client counts it
  bool operator==(const ResumeRequest&) const = default;
};
// Ops that carry nothing beyond id and op.
inline constexpr std::string_view kBareFields[] = {"id", "op"};
struct HeldRequest {
  static constexpr std::string_view kName = "held";
  static constexpr const auto& kFields = kBareFields;
  bool operator==(const HeldRequest&) const = default;
};
struct HealthRequest {
  static constexpr std::string_view kName = "health";
  static constexpr const auto& kFields = kBareFields;
  bool operator==(const HealthRequest&) const = default;
};
struct PingRequest {
  static constexpr std::string_view kName = "ping";
  static constexpr const auto& kFields = kBareFields;
  bool operator==(const PingRequest&) const = default;
};
// The agent hands everything over to the binary now at its path (docs/upgrade.md); the reply
// comes from the new process, or from this one when the upgrade failed (it keeps serving).
// Only the agent's own uid and root may ask.
struct UpgradeRequest {
  static constexpr std::string_view kName = "upgrade";
  static constexpr const auto& kFields = kBareFields;
  bool operator==(const UpgradeRequest&) const = default;
};
// Every lock held through this agent (all sessions), without tokens: for operators.
struct LocksRequest {
  static constexpr std::string_view kName = "locks";
  static constexpr const auto& kFields = kBareFields;
  bool operator==(const LocksRequest&) const = default;
};

// Leader election (docs/protocol.md "Elections"). An election NAME is the lock NAME whose
// exclusive holder is the leader; its term is the grant's fence.
// Campaign: wait (up to wait_ms) to lead, then lead while this connection lives (renewed);
// the reply comes when elected.
struct CampaignRequest {
  static constexpr std::string_view kName = "campaign";
  static constexpr std::string_view kFields[] = {"id", "op", "name", "value", "ttl_ms", "wait_ms"};
  std::string name;
  std::string value;  // what the leader announces (e.g. "host-a:8080"): 1..kMaxValueBytes
  int64_t ttl_ms = 0;
  int64_t wait_ms = 0;  // absent: max_wait_ms
  static constexpr size_t kMaxValueBytes = 1024;
  bool operator==(const CampaignRequest&) const = default;
};
// Stop leading (the token campaign answered).
struct ResignRequest {
  static constexpr std::string_view kName = "resign";
  static constexpr std::string_view kFields[] = {"id", "op", "name", "token"};
  std::string name;
  std::string token;
  bool operator==(const ResignRequest&) const = default;
};
// Ops that name an election and carry nothing else.
inline constexpr std::string_view kNamedFields[] = {"id", "op", "name"};
// Who leads NAME now, read from the masters.
struct LeaderRequest {
  static constexpr std::string_view kName = "leader";
  static constexpr const auto& kFields = kNamedFields;
  std::string name;
  bool operator==(const LeaderRequest&) const = default;
};
// Follow NAME's leader: answered like leader, then a `leader` event at every change.
struct ObserveRequest {
  static constexpr std::string_view kName = "observe";
  static constexpr const auto& kFields = kNamedFields;
  std::string name;
  bool operator==(const ObserveRequest&) const = default;
};
struct UnobserveRequest {
  static constexpr std::string_view kName = "unobserve";
  static constexpr const auto& kFields = kNamedFields;
  std::string name;
  bool operator==(const UnobserveRequest&) const = default;
};

using Op = std::variant<AcquireRequest, ReleaseRequest, ExtendRequest, HeldRequest, HealthRequest,
                        PingRequest, LocksRequest, CampaignRequest, ResignRequest, LeaderRequest,
                        ObserveRequest, UnobserveRequest, ResumeRequest, UpgradeRequest>;

// `id` is echoed verbatim in the reply: a JSON integer or a string of at most 128 bytes, or
// null when the client sent none.
struct Request {
  nlohmann::json id;
  Op op;
  // Equal ids and equal ops (a JSON integer id equals the same value however it was stored).
  bool operator==(const Request&) const = default;
};

// A request that cannot be served. `id` is the request's id when it could be read, else null.
struct DecodeError {
  nlohmann::json id;
  ErrorCode code = ErrorCode::kBadRequest;
  std::string message;
  std::string op;  // the op named by the request, when it named a known one; else empty
};

// "acquire", "release", ... as on the wire.
std::string_view OpName(const Op& op);

// Bounds the decoder enforces; they come from the agent's configuration.
struct Limits {
  int64_t min_ttl_ms = kDefaultMinTtlMs;
  int64_t max_ttl_ms = kDefaultMaxTtlMs;
  int64_t default_ttl_ms = kDefaultTtlMs;  // acquire without ttl_ms
  int64_t max_wait_ms = kDefaultMaxWaitMs;
};

// Decodes one line (without its trailing '\n'). Every field is type- and range-checked;
// unknown ops and unknown fields are refused so that a typo never silently changes meaning.
std::variant<Request, DecodeError> DecodeRequest(std::string_view line, const Limits& limits);

// Views of engine state, shaped for the wire.
struct NodeHealthView {
  std::string addr;
  std::string tls;    // "off", "verified" or "unverified" (redis/node.h)
  std::string error;  // while down: why (the last connect failure)
  bool up = false;
  double rtt_ms = 0;  // last health-check round trip; meaningless when !up
  // Restart quarantine: its votes do not count toward quorum (left and reason only while so).
  bool quarantined = false;
  int64_t quarantine_left_ms = 0;
  std::string quarantine_reason = {};
};

// An election's leader as clients see it: what its campaign said of itself (the record's
// payload) with the record's term and since.
struct LeaderView {
  std::string value;  // the campaign's value (e.g. "host-a:8080")
  std::string agent;  // the id of the agent it campaigned through
  std::string host;   // that agent's host name
  int64_t pid = -1;   // the campaigning process (-1: unknown)
  int64_t since_ms = 0;  // Unix ms of the grant, on the granting agent's clock
  int64_t term = 0;
};

// What a campaign stores of itself in the leader's record (a JSON object: value, agent, host,
// pid), and a record read back as a LeaderView (fields missing from an odd payload are left
// empty, pid -1).
std::string EncodeCandidate(std::string_view value, std::string_view agent, std::string_view host,
                            int64_t pid);
LeaderView LeaderViewOf(const ElectionRecord& record);

// Encoders. Each returns one complete line, '\n'-terminated.
std::string EncodeOk(const nlohmann::json& id);
// The upgrade's reply, from the new process: who serves now and what it took over.
struct Upgraded {
  int pid = 0;
  int previous_pid = 0;
  std::string version;
  int64_t handover_ms = 0;  // from the old process holding its requests to this reply
  size_t sessions = 0;
  size_t locks = 0;
};
std::string EncodeUpgraded(const nlohmann::json& id, const Upgraded& upgraded);
// fence: only for acquires that asked for one. mode: written unless exclusive (a mutex), with
// permit for a semaphore's. depth: a reentrant hold's (written when > 0).
std::string EncodeAcquired(const nlohmann::json& id, std::string_view resource,
                           std::string_view token, int64_t validity_ms, int64_t waited_ms,
                           std::optional<int64_t> fence = std::nullopt,
                           HoldMode mode = HoldMode::kExclusive, int permit = -1, int depth = 0);
// One grant of an acquire of several resources.
struct GrantOfMany {
  std::string resource;
  std::string token;
  int64_t validity_ms = 0;  // left as the reply is written
  int64_t waited_ms = 0;
  std::optional<int64_t> fence;
  HoldMode mode = HoldMode::kExclusive;
  int permit = -1;
};
// {"ok":true,"resources":[{resource, token, validity_ms, waited_ms, fence?, mode?, permit?}...],
// "validity_ms": the least of theirs, "waited_ms": the whole acquire's}.
std::string EncodeAcquiredMany(const nlohmann::json& id, const std::vector<GrantOfMany>& grants,
                               int64_t waited_ms);
// A release of a reentrant hold that leaves it held: {"ok":true,"depth":n}, n acquires left.
std::string EncodeUnwound(const nlohmann::json& id, int depth);
std::string EncodeExtended(const nlohmann::json& id, int64_t validity_ms);
std::string EncodeHeld(const nlohmann::json& id, const std::vector<HeldLock>& locks);
// admin_url: the agent's admin API as reachable from its host ("": admin_listen is off; the
// field is left out when null, as for an encoder test).
std::string EncodeHealth(const nlohmann::json& id, int quorum,
                         const std::vector<NodeHealthView>& nodes,
                         const std::optional<std::string>& admin_url = std::nullopt);
std::string EncodeLocks(const nlohmann::json& id, const std::vector<LockView>& locks);
std::string EncodeError(const nlohmann::json& id, ErrorCode code, std::string_view message);
// campaign's reply: elected, with the term (the grant's fence).
std::string EncodeElected(const nlohmann::json& id, std::string_view name, int64_t term,
                          std::string_view token, int64_t validity_ms, int64_t waited_ms);
// leader's and observe's reply: "leader" is the view or null.
std::string EncodeLeader(const nlohmann::json& id, std::string_view name,
                         const std::optional<LeaderView>& leader);
// Pushed to an observer: {"event":"leader","name","leader":{...}|null,"term","missed"}.
std::string EncodeLeaderEvent(std::string_view name, const std::optional<LeaderView>& leader,
                              int64_t term, bool missed);
// Pushed without an id. reason: "renew_failed", "expired", "revoked".
std::string EncodeLost(std::string_view resource, std::string_view token,
                       std::string_view reason);

}  // namespace lw::protocol
