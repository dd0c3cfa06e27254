// Kind: what every kind does unless it says otherwise, the helpers the kinds share, and the
// registry of kinds.
#include "locking/kinds/kind.h"

#include <utility>

#include "locking/fencing.h"
#include "locking/kinds/kinds.h"
#include "redis/scripts.h"

namespace lw {
namespace {

// Why masters refused an attempt, for the failure text.
std::string RefusalText(const KindRefusals& r, int k) {
  if (r.writer > 0) return "a writer holds it on " + std::to_string(r.writer) + " master(s)";
  if (r.readers > 0) return "readers hold it on " + std::to_string(r.readers) + " master(s)";
  if (r.writer_waiting > 0) {
    return "a writer waits (new readers are refused) on " + std::to_string(r.writer_waiting) +
           " master(s)";
  }
  if (r.taken > 0) return "all " + std::to_string(k) + " permits were held";
  return "";
}

// A value found at a resource's base key, as a kind for people.
std::string FoundKind(const std::string& value) {
  const auto shape = ShapeOfMarker(value);
  if (value == "readers" || value == kReadersMark) return "a lock with shared holders on a master";
  return shape ? shape->WithArticle() + " on a master" : "a lock held exclusively on a master";
}

}  // namespace

HoldMode Kind::ModeAsked(bool /*shared*/) const { return HoldMode::kExclusive; }

bool Kind::MayContendBeside(const LockShape& /*shape*/, HoldMode /*mode*/,
                            const Holders& /*held*/) const {
  return false;
}

int Kind::ChoosePart(const LockShape& /*shape*/, KindSlot& /*state*/, const Holders& /*held*/,
                     std::mt19937_64& /*rng*/) const {
  return -1;
}

RoundRequest Kind::FenceRound(const AttemptCall& a, int64_t fence, int64_t /*unix_ms*/,
                              const std::string& /*payload*/, std::string* note) const {
  note->clear();
  return FencePhase2({HoldKey(a.place), FenceKey(a.place)}, a.token, fence, a.fence_needed);
}

RefusalReading Kind::Refused(const RoundResult& res, const LockShape& shape,
                             KindSlot& /*state*/, uint64_t /*waiter*/, int /*quorum*/,
                             bool /*may_retry_now*/) const {
  RefusalReading out;
  out.why = RefusalText(res.refusals, shape.permits);
  if (res.refusals.foreign) out.foreign = FoundKind(*res.refusals.foreign);
  return out;
}

RoundRequest Kind::UndoRound(const AttemptCall& a, const KindSlot& /*state*/,
                             bool /*giving_up*/) const {
  return ReleaseRound(a.place, a.token);
}

std::optional<RoundRequest> Kind::Granted(const AttemptCall& /*a*/, KindSlot& /*state*/) const {
  return std::nullopt;
}

RoundRequest Kind::ExtendRound(const HoldPlace& p, const std::string& token,
                               int64_t ttl_ms) const {
  RoundRequest req;
  req.op = RoundOp::kExtendIfHeld;
  req.token = token;
  req.key = HoldKey(p);
  req.ttl_ms = ttl_ms;
  return req;
}

RoundRequest Kind::ReleaseRound(const HoldPlace& p, const std::string& token) const {
  return DeleteRound(HoldKey(p), token);
}

RoundRequest Kind::ReleaseTurn(const HoldPlace& p, const std::string& token,
                               const std::string& /*value_prefix*/, const Turn& /*turn*/) const {
  return ReleaseRound(p, token);
}

void Kind::Describe(const Holder& /*h*/, LockView& /*view*/) const {}

const Kind& KindOf(const LockShape& shape) {
  static const kinds::ReadWrite read_write;
  static const kinds::Semaphore semaphore;
  static const kinds::Election election;
  switch (shape.kind) {
    case LockKind::kMutex:
      return read_write;
    case LockKind::kSemaphore:
      return semaphore;
    case LockKind::kElection:
      return election;
  }
  return read_write;
}

namespace kinds {

RoundRequest ClaimExclusive(const AttemptCall& a, const std::string& mark, bool may_hold_mark) {
  const HoldPlace& p = a.place;
  RoundRequest req = KindRound(
      RoundOp::kKindAcquire, scripts::KindScript::kClaimExclusive, a.token,
      {BaseKey(p), ReadersKey(p.key_prefix, p.name), WriterWaitingKey(p.key_prefix, p.name)},
      {std::to_string(a.ttl_ms), std::to_string(a.waiting_ttl_ms), mark,
       may_hold_mark ? "1" : "0", a.value_prefix, std::to_string(a.waited_ms),
       a.ask_others ? "1" : "0"});
  return Finish(std::move(req), a, BaseKey(p), p.fence_prefix + p.name);
}

RoundRequest Finish(RoundRequest req, const AttemptCall& a, const std::string& hold_key,
                    const std::string& fence_key) {
  if (a.fence_needed > 0) {
    req.keys.push_back(fence_key);
    req.needed = a.fence_needed;
  }
  req.key = hold_key;
  req.ttl_ms = a.ttl_ms;
  return req;
}

RoundRequest ReleasePart(const HoldPlace& p, const std::string& token,
                         const std::string& hold_key, const std::string& second_key,
                         const std::string& drop_mark) {
  RoundRequest req =
      KindRound(RoundOp::kKindRelease, scripts::KindScript::kReleasePart, token,
                {hold_key, second_key}, {scripts::ReleaseChannel(BaseKey(p)), drop_mark});
  req.key = hold_key;
  req.wait_all = true;
  return req;
}

RoundRequest ReleaseInTurn(const HoldPlace& p, const std::string& token,
                           const std::string& hold_key, const std::string& record_key,
                           const std::string& record, const std::string& value_prefix,
                           const Turn& turn) {
  std::vector<std::string> keys = {hold_key};
  std::vector<std::string> args = {scripts::ReleaseChannel(BaseKey(p)),
                                   std::to_string(turn.next_waited_ms),
                                   std::to_string(turn.reserve_ms), value_prefix};
  // P R beside a permit's key (its marker, and where the queue is); before a record to drop.
  if (hold_key != BaseKey(p) || !record.empty()) keys.push_back(BaseKey(p));
  if (!record.empty()) {
    keys.push_back(record_key);
    args.push_back(record);
  }
  RoundRequest req = KindRound(RoundOp::kKindRelease, scripts::KindScript::kReleaseTurn, token,
                               std::move(keys), std::move(args));
  req.key = hold_key;
  req.wait_all = true;
  return req;
}

namespace {

// A round of `script` on the resource's queue keys for this agent, heard from every master.
RoundRequest QueueRound(RoundOp op, scripts::KindScript script, const HoldPlace& p,
                        const std::string& value_prefix) {
  RoundRequest req = KindRound(
      op, script, "", {QueueKey(p.key_prefix, p.name), QueueAliveKey(p.key_prefix, p.name)},
      {value_prefix});
  req.key = QueueKey(p.key_prefix, p.name);
  req.wait_all = true;
  return req;
}

}  // namespace

RoundRequest LeaveQueue(const HoldPlace& p, const std::string& value_prefix) {
  return QueueRound(RoundOp::kKindRelease, scripts::KindScript::kLeaveQueue, p, value_prefix);
}

RoundRequest QueueHead(const HoldPlace& p, const std::string& value_prefix) {
  return QueueRound(RoundOp::kKindRead, scripts::KindScript::kQueueHead, p, value_prefix);
}

RoundRequest TakeLease(const HoldPlace& p, const std::string& token, int64_t ttl_ms) {
  RoundRequest req = KindRound(RoundOp::kKindExtend, scripts::KindScript::kTakeLease, token,
                               {BaseKey(p)}, {std::to_string(ttl_ms)});
  req.key = BaseKey(p);
  req.ttl_ms = ttl_ms;
  return req;
}

}  // namespace kinds
}  // namespace lw
