// The lock kind: exclusive holds and shared (read) holds (docs/safety.md, "Read-write locks").
#include <utility>

#include "locking/kinds/kinds.h"
#include "redis/scripts.h"

namespace lw::kinds {
namespace {

// The writer-waiting mark of the exclusive acquire contending now: its first attempt's value,
// the same for all its attempts, so that every master holds at most one mark of it.
struct WriterMark : KindState {
  uint64_t waiter = 0;
  std::string mark;
  bool marked = false;  // a master refused it because readers hold: its mark may be there
};

WriterMark* MarkOf(const KindSlot& state, uint64_t waiter) {
  auto* m = static_cast<WriterMark*>(state.get());
  return m != nullptr && m->waiter == waiter ? m : nullptr;
}

}  // namespace

HoldMode ReadWrite::ModeAsked(bool shared) const {
  return shared ? HoldMode::kShared : HoldMode::kExclusive;
}

bool ReadWrite::MayContendBeside(const LockShape& /*shape*/, HoldMode mode,
                                 const Holders& held) const {
  // Readers share with readers; an exclusive acquire waits for everything held here to go.
  return mode == HoldMode::kShared && held.front()->mode == HoldMode::kShared;
}

std::string ReadWrite::HoldKey(const HoldPlace& p) const {
  return p.mode == HoldMode::kShared ? ReadersKey(p.key_prefix, p.name) : BaseKey(p);
}

RoundRequest ReadWrite::AcquireRound(const AttemptCall& a, KindSlot& state) const {
  const HoldPlace& p = a.place;
  if (p.mode == HoldMode::kShared) {
    RoundRequest req = KindRound(
        RoundOp::kKindAcquire, scripts::KindScript::kClaimShared, a.token,
        {BaseKey(p), ReadersKey(p.key_prefix, p.name), WriterWaitingKey(p.key_prefix, p.name)},
        {std::to_string(a.ttl_ms), a.value_prefix, std::to_string(a.waited_ms),
         std::to_string(a.waiting_ttl_ms), p.mark_readers ? "1" : "0"});
    return Finish(std::move(req), a, HoldKey(p), p.fence_prefix + p.name);
  }
  if (MarkOf(state, a.waiter) == nullptr) {
    auto m = std::make_unique<WriterMark>();
    m->waiter = a.waiter;
    m->mark = a.value_prefix + a.token;  // no other hold ever has this value
    state = std::move(m);
  }
  RoundRequest req = ClaimExclusive(a, MarkOf(state, a.waiter)->mark, a.attempt > 1);
  // Readers marked everywhere: a plain claim is a SET NX first. A fenced one reads the counter
  // and one that asks how long others wait needs the script's answer: those stay scripts. A
  // mark an earlier attempt left goes by Granted's round, as after a script's grant.
  req.native = p.native_claims && a.fence_needed == 0 && !a.ask_others;
  return req;
}

void ReadWrite::Heard(const RoundResult& res, KindSlot& state, uint64_t waiter) const {
  if (WriterMark* m = MarkOf(state, waiter)) m->marked = m->marked || res.refusals.readers > 0;
}

RoundRequest ReadWrite::UndoRound(const AttemptCall& a, const KindSlot& state,
                                  bool giving_up) const {
  const WriterMark* m = MarkOf(state, a.waiter);
  if (a.place.mode == HoldMode::kShared || !giving_up || m == nullptr) {
    return ReleaseRound(a.place, a.token);
  }
  // Giving up also drops its mark, where it is still this waiter's.
  return ReleasePart(a.place, a.token, BaseKey(a.place),
                     WriterWaitingKey(a.place.key_prefix, a.place.name), m->mark);
}

std::optional<RoundRequest> ReadWrite::Granted(const AttemptCall& a, KindSlot& state) const {
  const WriterMark* m = MarkOf(state, a.waiter);
  if (m == nullptr) return std::nullopt;
  // The mark belongs to the acquire contending, which ends here: it is not kept beside the
  // hold (at 100,000 held locks that would be ~11 MiB).
  std::optional<RoundRequest> drop;
  if (m->marked) {
    // Masters that refused an earlier attempt (or this one) keep the mark: nobody waits now.
    drop = DeleteRound(WriterWaitingKey(a.place.key_prefix, a.place.name),
                       m->mark.substr(a.value_prefix.size()));
  }
  state.reset();
  return drop;
}

RoundRequest ReadWrite::ExtendRound(const HoldPlace& p, const std::string& token,
                                    int64_t ttl_ms) const {
  if (p.mode != HoldMode::kShared) return Kind::ExtendRound(p, token, ttl_ms);
  std::vector<std::string> keys = {HoldKey(p)};
  if (p.mark_readers) keys.push_back(BaseKey(p));  // the readers' mark, made or kept
  RoundRequest req = KindRound(RoundOp::kKindExtend, scripts::KindScript::kExtendShared, token,
                               std::move(keys), {std::to_string(ttl_ms)});
  req.key = HoldKey(p);
  req.ttl_ms = ttl_ms;
  return req;
}

RoundRequest ReadWrite::ReleaseRound(const HoldPlace& p, const std::string& token) const {
  if (p.mode != HoldMode::kShared) return Kind::ReleaseRound(p, token);
  // P R too: the last reader takes the readers' mark with it (wherever it was made).
  RoundRequest req = KindRound(RoundOp::kKindRelease, scripts::KindScript::kReleaseShared, token,
                               {HoldKey(p), BaseKey(p)}, {scripts::ReleaseChannel(BaseKey(p))});
  req.key = HoldKey(p);
  req.wait_all = true;
  return req;
}

RoundRequest ReadWrite::ReleaseTurn(const HoldPlace& p, const std::string& token,
                                    const std::string& value_prefix, const Turn& turn) const {
  if (p.mode == HoldMode::kShared) return ReleaseRound(p, token);
  return ReleaseInTurn(p, token, BaseKey(p), BaseKey(p), "", value_prefix, turn);
}

}  // namespace lw::kinds
