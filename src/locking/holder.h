#pragma once
// Holder: one lock granted through this agent, as the engine keeps it while it is held.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/lock_kind.h"
#include "core/session_id.h"

namespace lw {

// A grant's token (NewToken: 40 hex characters) kept inline: as a std::string it would be a
// separate 48-byte allocation per held lock.
class FixedToken {
 public:
  FixedToken() = default;
  explicit FixedToken(const std::string& text) {
    text.copy(chars_.data(), chars_.size());
    size_ = static_cast<uint8_t>(std::min(text.size(), chars_.size()));
  }
  std::string str() const { return std::string(chars_.data(), size_); }
  bool operator==(const std::string& text) const {
    return text.size() == size_ && text.compare(0, size_, chars_.data(), size_) == 0;
  }

 private:
  std::array<char, 40> chars_{};
  uint8_t size_ = 0;
};

// The fields are ordered so that the small ones fill the token's padding: a Holder is one
// allocation per held lock (128 bytes, not 144).
struct Holder {
  using Clock = std::chrono::steady_clock;

  uint64_t serial = 0;  // the key of its deadline (the id it had as a waiter)
  SessionId session = 0;
  FixedToken token;  // the client's: identifies this grant
  bool renew = false;
  bool renewing = false;
  bool kept = false;  // left on the masters at Shutdown (AcquireKind::hold_as)
  // Which part of the resource it occupies (its kind's mode, and an index such as a permit).
  HoldMode mode = HoldMode::kExclusive;
  int16_t part = -1;
  // Extend rounds (client extends and renewals) not yet answered: while one is, the key's
  // expiry on the masters may still change, so the lock is not handed over locally.
  uint16_t extends_in_flight = 0;
  // How many acquires of its session and owner it stands for (reentrant ones); a release lowers
  // it, and lets go of the hold only at 1.
  uint16_t depth = 1;
  // As requested (renewals extend by the same); at most max_ttl_ms (3,600,000 at the most), so
  // 32 bits, which keeps a Holder within its 128 bytes.
  int32_t ttl_ms = 0;
  uint64_t owner = 0;  // AcquireKind::owner
  // The value of the key on the masters when it differs from token: a grant handed over
  // locally keeps its predecessor's key and value. Null: the key holds token.
  std::unique_ptr<FixedToken> lease;
  std::optional<int64_t> fence;
  Clock::time_point acquired, valid_until;
  // What its kind keeps beside the hold on the masters (an election's record); null: nothing.
  std::unique_ptr<std::string> note;

  // The key's value on the masters.
  std::string LeaseValue() const { return lease ? lease->str() : token.str(); }
};
static_assert(sizeof(Holder) <= 128, "a Holder per held lock: keep it within 128 bytes");

// One hold as an in-place upgrade hands it to the next process (LockEngine::HoldsOf, Adopt).
struct HandedHold {
  uint64_t serial = 0;  // Holder::serial in the process that hands it (names it in HoldUpdate)
  std::string resource;
  std::string token;
  std::string value;  // the key's value on the masters (Holder::LeaseValue)
  int64_t ttl_ms = 0;
  bool renew = false;
  std::optional<int64_t> fence;
  LockShape shape;
  HoldMode mode = HoldMode::kExclusive;
  int part = -1;
  std::string note;  // Holder::note ("": none)
  std::chrono::steady_clock::time_point acquired, valid_until;
  uint64_t owner = 0;  // Holder::owner
  int depth = 1;       // Holder::depth
};

// A hold the next process has from a pre-copy (docs/upgrade.md), as it is at the hand-over: all
// that may change while a hold is held is its ttl (an extend), its validity (a renewal) and its
// depth (a reentrant acquire or release).
struct HoldUpdate {
  uint64_t serial = 0;  // HandedHold::serial
  int64_t ttl_ms = 0;
  std::chrono::steady_clock::time_point valid_until;
  int depth = 1;  // a reentrant acquire or release changes it too
};

// Whole milliseconds from now until `until`, rounded down: a lock's validity as answered to a
// client (never more than is really left).
inline int64_t MsLeft(std::chrono::steady_clock::time_point until,
                      std::chrono::steady_clock::time_point now) {
  return std::chrono::floor<std::chrono::milliseconds>(until - now).count();
}

// Whole milliseconds of d, rounded up.
inline int64_t CeilMs(std::chrono::steady_clock::duration d) {
  return std::chrono::ceil<std::chrono::milliseconds>(d).count();
}

}  // namespace lw
