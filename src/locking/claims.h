#pragma once
// Claims: where a hold lives and the round shapes every kind builds on. Pure. Each kind's own
// rounds (which script, which keys) live with the kind (locking/kinds/); the key layout in
// core/lock_kind.h and the scripts in redis/kind_scripts.h.

#include <cstdint>
#include <string>
#include <string_view>

#include "core/lock_kind.h"
#include "locking/rounds.h"

namespace lw {

// One hold's place: which resource, of which shape, and which part of it.
struct HoldPlace {
  const std::string& key_prefix;
  const std::string& fence_prefix;
  const std::string& name;
  LockShape shape;
  HoldMode mode = HoldMode::kExclusive;
  int permit = -1;  // the part's index (a semaphore's permit), -1 for none
  // What the kind keeps beside the hold (Holder::note; an election's record), "" when nothing
  // (or not known yet).
  std::string_view record = {};
  // The key layout in use (docs/safety.md §7): read holds are marked at P R; an exclusive
  // claim may be a native SET NX (every agent marks readers, for long enough).
  bool mark_readers = false;
  bool native_claims = false;
};

// The resource's base key (a mutex's key, a semaphore's marker; release announcements use it).
std::string BaseKey(const HoldPlace& p);

// A round of a kind script `script` for the hold with `token`, on `keys`, with `args` after
// the value.
RoundRequest KindRound(RoundOp op, scripts::KindScript script, const std::string& token,
                       std::vector<std::string> keys, std::vector<std::string> args = {});

// An election's leader as each master has it (kReadRecord; waits for every master).
RoundRequest ReadRecordRound(const std::string& key_prefix, const std::string& name);

}  // namespace lw
