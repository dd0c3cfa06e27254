// The election kind: a fenced exclusive hold whose fence is the term, with the leader's record
// beside it (docs/safety.md, "Elections"; core/election_record.h).
#include "core/election_record.h"
#include "locking/kinds/kinds.h"
#include "redis/scripts.h"

namespace lw::kinds {

RoundRequest Election::AcquireRound(const AttemptCall& a, KindSlot& /*state*/) const {
  return ClaimExclusive(a, "", a.attempt > 1);
}

RoundRequest Election::FenceRound(const AttemptCall& a, int64_t fence, int64_t unix_ms,
                                  const std::string& payload, std::string* note) const {
  const HoldPlace& p = a.place;
  *note = StoredRecord(a.value_prefix + a.token, {fence, unix_ms, payload});
  // The fence and the record written where the hold is still there; the change announced.
  RoundRequest req = KindRound(
      RoundOp::kKindFence, scripts::KindScript::kFenceRecord, a.token,
      {BaseKey(p), FenceKey(p), LeaderKey(p.key_prefix, p.name)},
      {std::to_string(fence), *note, scripts::ReleaseChannel(BaseKey(p))});
  req.key = BaseKey(p);
  req.fence = fence;
  req.needed = a.fence_needed;
  return req;
}

RoundRequest Election::ExtendRound(const HoldPlace& p, const std::string& token,
                                   int64_t ttl_ms) const {
  // The record lives at least as long as the hold (kExtendPermit: KEYS marker-like, key).
  RoundRequest req = KindRound(RoundOp::kKindExtend, scripts::KindScript::kExtendPermit, token,
                               {LeaderKey(p.key_prefix, p.name), BaseKey(p)},
                               {std::to_string(ttl_ms)});
  req.key = BaseKey(p);
  req.ttl_ms = ttl_ms;
  return req;
}

RoundRequest Election::ReleaseRound(const HoldPlace& p, const std::string& token) const {
  // The record goes first, only if it is this leader's.
  return ReleasePart(p, token, BaseKey(p), LeaderKey(p.key_prefix, p.name),
                     std::string(p.record));
}

RoundRequest Election::ReleaseTurn(const HoldPlace& p, const std::string& token,
                                   const std::string& value_prefix, const Turn& turn) const {
  return ReleaseInTurn(p, token, BaseKey(p), LeaderKey(p.key_prefix, p.name),
                       std::string(p.record), value_prefix, turn);
}

void Election::Describe(const Holder& h, LockView& view) const {
  if (!h.note) return;
  if (auto stored = ParseStoredRecord(*h.note)) view.election = std::move(stored->record);
}

}  // namespace lw::kinds
