#pragma once
// Leak-scanner logic with no I/O: what a key's PTTL means, which lock tokens sit on too few
// masters, how long a finding has been seen, how fast a scan may go.

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/scan_pace.h"  // PrefixPattern, PaceDelay (the scanner's walk)
#include "redis/reply.h"

namespace lw {

enum class FindingKind { kNoTtl, kTtlAboveMax, kPartial };
inline constexpr std::array<std::string_view, 3> kFindingNames = {"no_ttl", "ttl_above_max",
                                                                   "partial"};
std::string_view FindingName(FindingKind kind);  // kFindingNames[kind]

// Findings of one pass over one master, by kind.
struct FindingCounts {
  int64_t no_ttl = 0;
  int64_t ttl_above_max = 0;
  int64_t partial = 0;
};

struct Finding {
  size_t master = 0;  // index into the configured masters
  std::string key;
  FindingKind kind = FindingKind::kNoTtl;
  int64_t ttl_ms = -1;     // PTTL when found (-1: none)
  std::string redis_type;  // TYPE of the key ("string", "hash", ...), empty if unknown
  int copies = 0;          // kPartial: masters holding this key with this token
  int64_t first_seen_unix_ms = 0;
};

// What a key's PTTL makes of it. pttl -2 (gone) and ordinary TTLs are not findings. A TTL
// above max_ttl_ms is only suspicious on lock keys: other keys may legitimately live long.
std::optional<FindingKind> ClassifyTtl(int64_t pttl, bool is_lock_key, int64_t max_ttl_ms);

// A lock key seen on one master with its value (the grant's token).
struct LockCopy {
  size_t master = 0;
  std::string key;
  std::string token;
  int64_t ttl_ms = 0;
};
using Grants = std::set<std::pair<std::string, std::string>>;  // {key, token}
using LiveGrants = Grants;

// Members of one readers set read per pass (core/key_parts.h ListCommand).
inline constexpr int64_t kMaxReadersRead = 1000;

// The holds one lock key's read shows on master `master`, for the partial check. `value` is
// the reply of the key's ListCommand with scores (core/key_parts.h: GET, or ZRANGE WITHSCORES
// of a readers set); `pttl` the key's PTTL;
// `now_ms` the master's clock (TIME), against which a reader's score (its expiry) is read.
// - a mutex's key or a permit's: one copy with its value, when it has a TTL;
// - a readers set: one copy per reader not yet expired, ttl_ms its score - now_ms (at most
//   the set's PTTL); none when the set has no TTL (a no_ttl finding already);
// - a semaphore's marker, a writer-waiting mark, a key of a part this version does not know,
//   or a reply of another type: none. Marks are not holds: a marker or a writer-waiting mark
//   left on one master by an acquire that failed elsewhere is no leftover of a grant; their
//   TTLs are checked like any lock key's.
std::vector<LockCopy> HoldsOf(std::string_view key_prefix, size_t master, const std::string& key,
                              const Reply& value, int64_t pttl, int64_t now_ms);

// The master's clock from a TIME reply, in ms since the epoch; nullopt for another reply.
std::optional<int64_t> MasterNowMs(const Reply& time);

// Grants present on fewer than `quorum` masters and not live in this agent: one finding per
// copy. Copies without a TTL are left out (they are no_ttl findings already).
std::vector<Finding> PartialLeftovers(const std::vector<LockCopy>& copies, int quorum,
                                      const LiveGrants& live);

// The grants among `copies` present on fewer than `quorum` masters (with a TTL): what
// PartialLeftovers reports unless live (to re-check, then ask whether they are live).
Grants PartialGrants(const std::vector<LockCopy>& copies, int quorum);

// Findings that were in `previous` keep their first-seen time; new ones get `now_unix_ms`.
void CarryFirstSeen(std::vector<Finding>& fresh, const std::vector<Finding>& previous,
                    int64_t now_unix_ms);

// What the log says of one master's scan pass (`error` "" when it went well), given the error
// of the master's previous pass ("" when that went well, or for the first pass): a failure when
// it begins or its error changes, a warning; the first pass that goes well after one, once; and
// nothing for a pass that goes as the one before: a master that stays down is said once, not
// every scan interval (lockwarden_scan_errors_total still counts each failed pass).
struct ScanPassNews {
  bool warn = false;  // a failure (else news that it works again)
  std::string text;
};
std::optional<ScanPassNews> NewsOfScanPass(std::string_view master,
                                           const std::string& previous_error,
                                           const std::string& error);

}  // namespace lw
