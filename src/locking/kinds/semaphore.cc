// The semaphore kind: K permits, each a mutex of its own beside the marker at the base key
// (docs/safety.md, "Semaphores").
#include <utility>
#include <vector>

#include "locking/kinds/kinds.h"
#include "redis/scripts.h"

namespace lw::kinds {
namespace {

struct PermitHint : KindState {
  int hint = -1;          // a permit the masters last reported free
  int quick_retries = 0;  // attempts retried at once on such a report, in a row
};

PermitHint& HintOf(KindSlot& state) {
  if (!state) state = std::make_unique<PermitHint>();
  return static_cast<PermitHint&>(*state);
}

// The permit most masters reported free, and how many did; {-1, 0} when none.
std::pair<int, int> BestFreePermit(const KindRefusals& r) {
  std::pair<int, int> best{-1, 0};
  for (size_t i = 0; i < r.free_permits.size(); ++i) {
    if (r.free_permits[i] > best.second) best = {static_cast<int>(i), r.free_permits[i]};
  }
  return best;
}

}  // namespace

HoldMode Semaphore::ModeAsked(bool /*shared*/) const { return HoldMode::kPermit; }

bool Semaphore::MayContendBeside(const LockShape& shape, HoldMode /*mode*/,
                                 const Holders& held) const {
  return static_cast<int>(held.size()) < shape.permits;
}

int Semaphore::ChoosePart(const LockShape& shape, KindSlot& state, const Holders& held,
                          std::mt19937_64& rng) const {
  const int k = shape.permits;
  std::vector<bool> mine(static_cast<size_t>(k), false);
  for (const auto& h : held) mine[static_cast<size_t>(h->part)] = true;
  PermitHint& s = HintOf(state);
  if (s.hint >= 0 && s.hint < k && !mine[static_cast<size_t>(s.hint)]) {
    return std::exchange(s.hint, -1);
  }
  s.hint = -1;
  // Start at a random permit so that agents spread over them.
  std::uniform_int_distribution<int> start(0, k - 1);
  const int first = start(rng);
  for (int i = 0; i < k; ++i) {
    const int p = (first + i) % k;
    if (!mine[static_cast<size_t>(p)]) return p;
  }
  return first;  // unreachable: MayContendBeside leaves a permit free
}

std::string Semaphore::HoldKey(const HoldPlace& p) const {
  return PermitKey(p.key_prefix, p.name, p.permit);
}

std::string Semaphore::FenceKey(const HoldPlace& p) const {
  return PermitFenceKey(p.fence_prefix, p.name, p.permit);
}

RoundRequest Semaphore::AcquireRound(const AttemptCall& a, KindSlot& /*state*/) const {
  const HoldPlace& p = a.place;
  std::string permits_prefix = PermitKey(p.key_prefix, p.name, 0);
  permits_prefix.pop_back();  // P R US "permit:"
  RoundRequest req = KindRound(
      RoundOp::kKindAcquire, scripts::KindScript::kClaimPermit, a.token,
      {BaseKey(p), HoldKey(p), ReadersKey(p.key_prefix, p.name)},
      {std::to_string(a.ttl_ms), p.shape.Marker(), std::to_string(p.shape.permits),
       std::to_string(p.permit), std::move(permits_prefix), a.value_prefix,
       std::to_string(a.waited_ms), std::to_string(a.waiting_ttl_ms), a.ask_others ? "1" : "0"});
  return Finish(std::move(req), a, HoldKey(p), FenceKey(p));
}

RefusalReading Semaphore::Refused(const RoundResult& res, const LockShape& shape,
                                  KindSlot& state, uint64_t waiter, int quorum,
                                  bool may_retry_now) const {
  RefusalReading out = Kind::Refused(res, shape, state, waiter, quorum, may_retry_now);
  // A permit named free on a quorum of masters: try it at once, even with no wait left (a free
  // permit is not a holder to wait for), a few times in a row at most so that a race for it
  // never spins.
  PermitHint& s = HintOf(state);
  const auto [permit, votes] = BestFreePermit(res.refusals);
  s.hint = permit;
  out.retry_now = may_retry_now && !out.foreign && permit >= 0 && votes >= quorum &&
                  s.quick_retries < 3;
  s.quick_retries = out.retry_now ? s.quick_retries + 1 : 0;
  return out;
}

RoundRequest Semaphore::UndoRound(const AttemptCall& a, const KindSlot& /*state*/,
                                  bool /*giving_up*/) const {
  return ReleaseRound(a.place, a.token);
}

std::optional<RoundRequest> Semaphore::Granted(const AttemptCall& /*a*/, KindSlot& state) const {
  HintOf(state).quick_retries = 0;
  return std::nullopt;
}

RoundRequest Semaphore::ExtendRound(const HoldPlace& p, const std::string& token,
                                    int64_t ttl_ms) const {
  RoundRequest req = KindRound(RoundOp::kKindExtend, scripts::KindScript::kExtendPermit, token,
                               {BaseKey(p), HoldKey(p)}, {std::to_string(ttl_ms)});
  req.key = HoldKey(p);
  req.ttl_ms = ttl_ms;
  return req;
}

RoundRequest Semaphore::ReleaseRound(const HoldPlace& p, const std::string& token) const {
  return ReleasePart(p, token, HoldKey(p), WriterWaitingKey(p.key_prefix, p.name), "");
}

RoundRequest Semaphore::ReleaseTurn(const HoldPlace& p, const std::string& token,
                                    const std::string& value_prefix, const Turn& turn) const {
  return ReleaseInTurn(p, token, HoldKey(p), HoldKey(p), "", value_prefix, turn);
}

}  // namespace lw::kinds
