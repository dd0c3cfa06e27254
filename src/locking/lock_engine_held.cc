// LockEngine: held locks (release and local hand-off, extend, renewal, loss, revoke).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <memory>

#include "core/redlock_math.h"
#include "core/token.h"
#include "locking/failure_text.h"
#include "locking/handoff.h"
#include "locking/kinds/kinds.h"
#include "locking/lock_engine.h"

namespace lw {
namespace {

// kQueueHead's answer: a whole number of ms (anything else reads as a long wait, which only
// stops local hand-off).
int64_t ParseWaited(const std::string& text) {
  int64_t ms = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  return ec == std::errc() && end == text.data() + text.size() && ms >= 0 ? ms : INT32_MAX;
}

}  // namespace

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
  HandOffCase c;
  bool ask = false;
  c.engine_stopping = shutting_down_;
  c.attempt_in_flight = r.attempt_in_flight;
  c.released_fenced = prev.fence.has_value();
  c.released_extending = prev.extends_in_flight > 0;
  c.released_ttl_ms = prev.ttl_ms;
  c.left_ms = MsLeft(prev.valid_until, now);
  if (!r.waiters.empty()) {
    const Waiter& next = r.waiters.front();
    // Only into the same part of the resource (the same mode).
    c.next_waiting = !next.cancelled && !next.in_attempt && next.mode == prev.mode;
    c.next_fenced = next.history.fence;
    c.next_ttl_ms = next.history.ttl_ms;
    c.turns = TakesTurns(r, prev.mode);
    c.next_first = MayGoBeforeOthers(next.requested, r.others, now, HandOffWindowMs());
    // Nobody waited elsewhere when last heard, but that was a window ago: hand over and ask the
    // masters again beside it, rather than send this release through them (for a semaphore,
    // that sets every other holder's release on the same path until a grant). Nothing heard (a
    // grant with no local waiter to ask for) or a waiter heard of: through the masters.
    ask = c.turns && !c.next_first && r.others.asked && r.others.waited_ms < 0;
    c.next_first = c.next_first || ask;
  }
  if (!MayHandOff(c)) {
    HandOffCase alone = c;
    alone.turns = false;
    if (c.turns && MayHandOff(alone)) stats_->handoffs_in_turn.Inc();
    return false;
  }
  if (ask) AskOthers(name, r);
  Waiter w = r.waiters.PopFront();
  if (r.retry_timer) r.retry_timer->Stop();
  Holder& h = Install(r, name, w, prev.mode, prev.part);
  h.token = FixedToken(NewToken());
  h.lease = std::make_unique<FixedToken>(prev.lease ? *prev.lease : prev.token);
  h.acquired = now;
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
            });
}

void LockEngine::RunExtend(const std::string& name, const std::string& token, int64_t ttl_ms,
                           ExtendDone done, int64_t timeout_ms) {
  Holder* holder = FindHolder(name, token);  // callers hold it: non-null
  const Resource& r = *Find(name);
  RoundRequest req =
      r.kind().ExtendRound(table_.PlaceOf(name, r, *holder), holder->LeaseValue(), ttl_ms);
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

void LockEngine::OnDeadline(uint64_t serial, const std::string& name) {
  Resource* r = Find(name);
  if (r == nullptr) return;
  if (const Holder* h = ResourceTable::WithSerial(*r, serial)) {
    const std::string token = h->token.str();  // a copy: the holder may go while it runs
    OnHolderTimer(name, token);
  } else {
    OnWaitExpired(name, serial);
  }
}

void LockEngine::OnHolderTimer(const std::string& name, const std::string& token) {
  Holder* h = FindHolder(name, token);
  if (h == nullptr) return;
  const auto now = Clock::now();
  if (now >= h->valid_until) {
    Lose(name, token, h->renew ? LossReason::kRenewFailed : LossReason::kExpired);
    return;
  }
  if (!h->renew || h->renewing) {
    ScheduleHolder(name, *h, CeilMs(h->valid_until - now));
    return;
  }
  if (renewals_.MustWait()) {
    // The loss is still reported on time if its turn comes too late.
    const bool room = renewals_.Wait(name, h->serial);
    ScheduleHolder(name, *h, CeilMs(h->valid_until - now));
    if (room) Defer([this] { DrainRenewals(); });
    return;
  }
  Renew(name, *h, now);
}

void LockEngine::DrainRenewals() {
  renewals_.Drain([this](const std::string& name, uint64_t serial) {
    Resource* r = Find(name);
    const Holder* h = r == nullptr ? nullptr : ResourceTable::WithSerial(*r, serial);
    if (h == nullptr || h->renewing) return;
    OnHolderTimer(name, h->token.str());  // renews now, or reports the loss
  });
}

void LockEngine::Renew(const std::string& name, Holder& h, Clock::time_point now) {
  renewals_.Started();
  h.renewing = true;
  const int64_t left_ms = CeilMs(h.valid_until - now);
  const int64_t timeout_ms = RenewRoundTimeoutMs(left_ms, options_.node_timeout_ms);
  // The round ends (and reschedules) before the validity does, unless the node timeout alone
  // outlasts it: only then is a separate deadline needed to report the loss on time.
  if (timeout_ms >= left_ms) ScheduleHolder(name, h, left_ms);
  const std::string token = h.token.str();
  RunExtend(
      name, token, h.ttl_ms,
      [this, name, token](const std::variant<Extension, Failure>& result) {
        OnRenewed(name, token, result);
      },
      timeout_ms);
}

void LockEngine::OnRenewed(const std::string& name, const std::string& token,
                           const std::variant<Extension, Failure>& result) {
  if (renewals_.Ended()) Defer([this] { DrainRenewals(); });
  Holder* h = FindHolder(name, token);
  if (h == nullptr) return;
  h->renewing = false;
  const auto* f = std::get_if<Failure>(&result);
  if (f == nullptr) {  // extended; RunExtend scheduled the next renewal
    stats_->renewals[RenewOutcome::kExtended].Inc();
    return;
  }
  if (f->code == ErrorCode::kNotHeld) {
    stats_->renewals[RenewOutcome::kLost].Inc();
    Lose(name, token, LossReason::kRenewFailed);
    return;
  }
  stats_->renewals[RenewOutcome::kRetry].Inc();
  renewals_.WarnFailed(name, f->message);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  ScheduleHolder(name, *h,
                 RenewRetryDelayMs(CeilMs(h->valid_until - Clock::now()), options_.retry_delay_ms,
                                   options_.retry_jitter_ms, unit(rng_)));
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
  const auto part = ParseLockKey(options_.key_prefix, key);
  Resource* r = part ? Find(part->resource) : nullptr;
  const Holder* match = nullptr;
  if (r != nullptr) {
    for (const auto& h : r->holders) {
      if (options_.value_prefix + h->LeaseValue() == value &&
          r->kind().HoldKey(table_.PlaceOf(part->resource, *r, *h)) == key) {
        match = h.get();
      }
    }
  }
  if (match == nullptr) {
    Defer([done = std::move(done)] { done(std::nullopt); });
    return;
  }
  RevokeHeld(*r, part->resource, {match}, std::move(done));
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
  const HoldPlace place = table_.PlaceOf(name, r, h);
  if (!TakesTurns(r, h.mode)) return r.kind().ReleaseRound(place, h.LeaseValue());
  Turn turn;
  turn.reserve_ms = ReserveMs();
  // Only a next waiter that takes turns can claim a reservation for this agent.
  if (!r.waiters.empty() && !r.waiters.front().cancelled &&
      TakesTurns(r, r.waiters.front().mode)) {
    turn.next_waited_ms = CeilMs(Clock::now() - r.waiters.front().requested);
  }
  return r.kind().ReleaseTurn(place, h.LeaseValue(), options_.value_prefix, turn);
}

void LockEngine::ReleaseEverywhere(const std::string& name, const Resource& r, const Holder& h) {
  ReleaseEverywhere(HolderRelease(name, r, h));
}

void LockEngine::AskOthers(const std::string& name, Resource& r) {
  if (r.asking) return;
  r.asking = true;
  rounds_.Run(kinds::QueueHead(table_.PlaceOf(name, r, HoldMode::kExclusive, -1),
                               options_.value_prefix),
              [this, name](const RoundResult& res) {
                Resource* found = Find(name);
                if (found != nullptr) {
                  found->asking = false;
                  // Heard only when every master answered: one silent may have a waiter.
                  OthersHeard heard{true, -1, res.started};
                  for (size_t i = 0; i < res.values.size(); ++i) {
                    if (res.values[i]) {
                      heard.waited_ms = std::max(heard.waited_ms, ParseWaited(*res.values[i]));
                    } else if (!res.read_nil[i]) {
                      heard.asked = false;
                    }
                  }
                  found->others = heard;
                }
                MaybeFinishShutdown();
              });
}

void LockEngine::LeaveQueue(const std::string& name, Resource& r) {
  if (!r.queued) return;
  r.queued = false;
  ReleaseEverywhere(kinds::LeaveQueue(table_.PlaceOf(name, r, HoldMode::kExclusive, -1),
                                      options_.value_prefix));
}

void LockEngine::ReleaseEverywhere(RoundRequest release) {
  rounds_.Run(std::move(release), [this](const RoundResult&) { MaybeFinishShutdown(); });
}

}  // namespace lw
