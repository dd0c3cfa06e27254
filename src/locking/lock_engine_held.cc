// LockEngine: held locks (release and local hand-off, extend, renewal, loss, revoke).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "core/redlock_math.h"
#include "core/token.h"
#include "locking/failure_text.h"
#include "locking/handoff.h"
#include "locking/lock_engine.h"

namespace lw {

void LockEngine::Release(SessionId session, const std::string& name, const std::string& token,
                         ReleaseDone done) {
  Holder* h = FindHolder(name, token);
  if (h == nullptr || h->session != session) {
    Defer([done = std::move(done), name] { done(ReleaseNotHeld(name)); });
    return;
  }
  Resource& r = *Find(name);
  auto holder = TakeHolder(r, name, h);
  if (LocalHandOff(r, name, *holder)) {
    Defer([done = std::move(done)] { done(std::nullopt); });
    Pump(name);
    return;
  }
  // A lease another agent took over is taken back first (the two rounds reach each master in
  // this order), so its release ends it wherever it is.
  if (IsFleetLease(r, *holder)) ReleaseEverywhere(TakeLeaseRound(name, r, *holder, holder->ttl_ms));
  rounds_.Run(HolderRelease(name, r, *holder),
              [this, done = std::move(done)](const RoundResult&) {
                done(std::nullopt);
                MaybeFinishShutdown();
              });
  Pump(name);  // the next local waiter's SET is pipelined behind the delete
}

bool LockEngine::LocalHandOff(Resource& r, const std::string& name, const Holder& prev) {
  r.waiters.DropCancelledFront([this](const Waiter& w) { deadlines_.Erase(w.id); });
  const auto now = Clock::now();
  const Waiter* next = r.waiters.empty() ? nullptr : &r.waiters.front();
  HandOffCase c = HandOffCaseOf(prev, next, now);
  c.engine_stopping = shutting_down_;
  c.attempt_in_flight = r.attempt_in_flight;
  const bool ask = next && turns_.HandOff(r.turns, r.kind(), prev.mode, next->requested, now, c);
  if (!MayHandOff(c)) {
    HandOffCase alone = c;
    alone.turns = false;
    if (c.turns && MayHandOff(alone)) stats_->handoffs_in_turn.Inc();
    return false;
  }
  if (ask) AskOthers(name, r);
  Waiter w = r.waiters.PopFront();
  if (r.retry_timer) r.retry_timer->Stop();
  Holder& h = Install(r, name, w, prev.mode, prev.part, now);
  h.token = FixedToken(NewToken());
  h.lease = std::make_unique<FixedToken>(prev.lease ? *prev.lease : prev.token);
  h.valid_until = prev.valid_until;
  ScheduleHolder(name, h, HandOffDelayMs(w.renew, w.history.ttl_ms, c.left_ms));
  stats_->local_handoffs.Inc();
  AnswerGrant(w, name, h, c.left_ms, now);
  return true;
}

void LockEngine::Extend(SessionId session, const std::string& name, const std::string& token,
                        int64_t ttl_ms, ExtendDone done) {
  Holder* h = FindHolder(name, token);
  if (h == nullptr || h->session != session) {
    Defer([done = std::move(done), name] { done(ExtendNotHeld(name)); });
    return;
  }
  RunExtend(name, token, ttl_ms,
            [this, name, token, done = std::move(done)](
                const std::variant<Extension, Failure>& result) {
              const auto* f = std::get_if<Failure>(&result);
              Holder* held = FindHolder(name, token);
              if (f && f->code == ErrorCode::kNotHeld && held) {
                Resource& r = *Find(name);
                auto gone = TakeHolder(r, name, held);
                ReleaseEverywhere(name, r, *gone);
                Pump(name);
              }
              done(result);
            },
            /*timeout_ms=*/0);
}

void LockEngine::RunExtend(const std::string& name, const std::string& token, int64_t ttl_ms,
                           ExtendDone done, int64_t timeout_ms) {
  Holder* holder = FindHolder(name, token);  // callers hold it: non-null
  const Resource& r = *Find(name);
  RoundRequest req = IsFleetLease(r, *holder)
                         ? TakeLeaseRound(name, r, *holder, ttl_ms)
                         : r.kind().ExtendRound(table_.PlaceOf(name, r, *holder),
                                                holder->LeaseValue(), ttl_ms);
  req.timeout_ms = timeout_ms;
  ++holder->extends_in_flight;
  rounds_.Run(std::move(req),
              [this, name, token, ttl_ms, done = std::move(done)](const RoundResult& res) {
                OnExtendRound(name, token, ttl_ms, res, done);
              });
}

void LockEngine::OnExtendRound(const std::string& name, const std::string& token, int64_t ttl_ms,
                               const RoundResult& res, const ExtendDone& done) {
  Holder* h = FindHolder(name, token);
  if (h == nullptr) {
    done(ReleasedWhileExtending(name));
    MaybeFinishShutdown();
    return;
  }
  --h->extends_in_flight;
  const VoteTally& t = res.tally;
  const auto now = Clock::now();
  const int64_t validity = ValidityMs(ttl_ms, CeilMs(now - res.started), options_.drift_factor);
  if (t.Won() && validity > 0 && now < h->valid_until) {
    h->ttl_ms = ttl_ms;
    h->valid_until = now + std::chrono::milliseconds(validity);  // as in GrantHead
    table_.Touched(name, *h);
    ScheduleHolder(name, *h, RenewDelayMs(h->renew, ttl_ms, validity));
    done(Extension{validity});
    return;
  }
  // Masters whose votes count said the key is not ours: quorum can never come back.
  const bool lost =
      now >= h->valid_until || t.counting_answered() - t.counting_yes() >= t.quorum();
  done(ExtendFailure(name, t, rounds_.size(), lost, CeilMs(h->valid_until - now)));
}

void LockEngine::ScheduleHolder(const std::string& name, Holder& h, int64_t delay_ms) {
  SetDeadline(h.serial, name,
              Clock::now() + std::chrono::milliseconds(std::max<int64_t>(delay_ms, 0)));
}

void LockEngine::SetDeadline(uint64_t serial, const std::string& name, Clock::time_point due) {
  deadlines_.Set(serial, name, due);  // refused once shutting down: nothing is waited for
}

const Holder* LockEngine::HolderWithSerial(const std::string& name, uint64_t serial) {
  Resource* r = Find(name);
  return r == nullptr ? nullptr : ResourceTable::WithSerial(*r, serial);
}

void LockEngine::OnDeadline(uint64_t serial, const std::string& name) {
  Resource* r = Find(name);
  if (r == nullptr) return;
  if (const Holder* h = ResourceTable::WithSerial(*r, serial)) {
    const std::string token = h->token.str();  // a copy: the holder may go while it runs
    renewer_.Due(name, token);
  } else {
    OnWaitExpired(name, serial);
  }
}

void LockEngine::Lose(const std::string& name, const std::string& token, LossReason reason) {
  Holder* found = FindHolder(name, token);
  if (found == nullptr) return;
  Resource& r = *Find(name);
  auto h = TakeHolder(r, name, found);
  spdlog::warn("lock {} lost: {}", Quoted(name), NameOf(reason));
  stats_->LockLost(reason);
  // Its keys are left to expire on their own: each outlives the validity by the drift allowance
  // (set or extended with the whole ttl before the validity was counted), and a client that
  // counts its validity from the reply's arrival rather than its writing is covered by that
  // margin only while the keys stay (docs/safety.md).
  events_->Lost(h->session, name, h->token.str(), NameOf(reason));
  Pump(name);
}

void LockEngine::Revoke(const std::string& name, RevokeDone done) {
  Resource* r = Find(name);
  if (r == nullptr || r->holders.empty()) {
    Defer([done = std::move(done)] { done(std::nullopt); });
    return;
  }
  std::vector<const Holder*> holds;
  for (const auto& h : r->holders) holds.push_back(h.get());
  RevokeHeld(*r, name, std::move(holds), std::move(done));
}

void LockEngine::RevokeGrant(const std::string& key, const std::string& value, RevokeDone done) {
  const auto grant = table_.FindGrant(key, value);
  if (!grant) {
    Defer([done = std::move(done)] { done(std::nullopt); });
    return;
  }
  RevokeHeld(*Find(grant->name), grant->name, {grant->holder}, std::move(done));
}

void LockEngine::RevokeHeld(Resource& r, const std::string& name,
                            std::vector<const Holder*> holds, RevokeDone done) {
  // Every hold's release round reports to one tally; `done` runs when the last one ended.
  struct Tally {
    SessionId session = 0;
    int deleted = 0;
    int left = 0;
    int holds = 0;
    RevokeDone done;
  };
  auto tally = std::make_shared<Tally>();
  tally->done = std::move(done);
  tally->left = tally->holds = static_cast<int>(holds.size());
  tally->session = holds.front()->session;
  for (const Holder* held : holds) {
    auto h = TakeHolder(r, name, held);
    spdlog::warn("lock {} revoked by an operator (session {})", Quoted(name), h->session);
    stats_->LockLost(LossReason::kRevoked);
    rounds_.Run(HolderRelease(name, r, *h),
                [this, tally](const RoundResult& res) {
                  tally->deleted = std::max(tally->deleted, res.tally.yes());
                  if (--tally->left == 0) {
                    tally->done(Revocation{tally->session, tally->deleted, tally->holds});
                  }
                  MaybeFinishShutdown();
                });
    events_->Lost(h->session, name, h->token.str(), NameOf(LossReason::kRevoked));
  }
  Pump(name);
}

std::unique_ptr<Holder> LockEngine::TakeHolder(Resource& r, const std::string& name,
                                               const Holder* which) {
  auto h = table_.Take(r, name, which);
  stats_->holds[h->mode].Dec();
  deadlines_.Erase(h->serial);
  stats_->hold.ObserveSeconds(Clock::now() - h->acquired);
  return h;
}

RoundRequest LockEngine::HolderRelease(const std::string& name, const Resource& r,
                                       const Holder& h) const {
  const bool next = !r.waiters.empty() && !r.waiters.front().cancelled;
  return turns_.Release(r.kind(), table_.PlaceOf(name, r, h), h.LeaseValue(), h.mode,
                        next ? std::optional(r.waiters.front().mode) : std::nullopt,
                        next ? r.waiters.front().requested : Clock::time_point{});
}

void LockEngine::ReleaseEverywhere(const std::string& name, const Resource& r, const Holder& h) {
  ReleaseEverywhere(HolderRelease(name, r, h));
}

void LockEngine::AskOthers(const std::string& name, Resource& r) {
  auto ask = turns_.Ask(r.turns, table_.PlaceOf(name, r, HoldMode::kExclusive, -1));
  if (!ask) return;
  rounds_.Run(std::move(*ask), [this, name](const RoundResult& res) {
    if (Resource* found = Find(name)) Turns::Heard(found->turns, res);
    MaybeFinishShutdown();
  });
}

void LockEngine::LeaveQueue(const std::string& name, Resource& r) {
  auto leave = turns_.Leave(r.turns, table_.PlaceOf(name, r, HoldMode::kExclusive, -1));
  if (leave) ReleaseEverywhere(std::move(*leave));
}

void LockEngine::ReleaseEverywhere(RoundRequest release) {
  rounds_.Run(std::move(release), [this](const RoundResult&) { MaybeFinishShutdown(); });
}

}  // namespace lw
