// LockEngine: construction and the acquire path (waiting, attempts, fencing, grants).
#include "locking/lock_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "core/redlock_math.h"
#include "core/unix_time.h"
#include "core/token.h"
#include "locking/failure_text.h"
#include "locking/fencing.h"

namespace lw {
namespace {

EngineEvents& NoEvents() {
  static EngineEvents none;
  return none;
}

std::vector<std::string> Addresses(const std::vector<Node*>& nodes) {
  std::vector<std::string> out;
  for (const Node* n : nodes) out.push_back(n->status().addr);
  return out;
}

AcquireOutcome OutcomeOf(bool granted, ErrorCode code) {
  if (granted) return AcquireOutcome::kAcquired;
  if (code == ErrorCode::kTimeout) return AcquireOutcome::kTimeout;
  if (code == ErrorCode::kNoQuorum) return AcquireOutcome::kNoQuorum;
  return AcquireOutcome::kError;
}

}  // namespace

LockEngine::LockEngine(uv_loop_t* loop, std::vector<Node*> nodes, EngineOptions options)
    : loop_(loop),
      options_(std::move(options)),
      own_registry_(options_.stats ? nullptr : std::make_unique<stats::Registry>()),
      own_stats_(options_.stats ? nullptr
                                : std::make_unique<EngineStats>(*own_registry_, Addresses(nodes))),
      stats_(options_.stats ? options_.stats : own_stats_.get()),
      events_(options_.events ? options_.events : &NoEvents()),
      rounds_(loop, std::move(nodes), options_.node_timeout_ms, stats_, options_.value_prefix),
      fence_quorum_(options_.fence_quorum > 0 ? options_.fence_quorum
                                              : FenceQuorumSize(rounds_.size())),
      table_(options_.key_prefix, options_.fence_prefix, options_.value_prefix, options_.sessions,
             options_.stuck_after_ms),
      rng_(std::random_device{}()),
      deadlines_(loop, [this](uint64_t serial, const std::string& name) { OnDeadline(serial, name); }),
      defer_(loop) {
  table_.SetKeyLayout(options_.mark_readers, false);
  stats_->marks_readers.Set(options_.mark_readers ? 1 : 0);
}

LockEngine::~LockEngine() = default;

void LockEngine::SetLayout(bool mark_readers, bool native, Clock::time_point native_until) {
  native_claims_ = native && mark_readers;
  native_until_ = native_until;
  table_.SetKeyLayout(mark_readers, native_claims_);
  stats_->native_claims.Set(native_claims_ ? 1 : 0);
  stats_->marks_readers.Set(mark_readers ? 1 : 0);
}

// Not stored per resource: at 100k held locks a second copy of every name is ~6 MiB.
std::string LockEngine::KeyOf(const std::string& name) const { return options_.key_prefix + name; }

HoldPlace LockEngine::PlaceOf(const AttemptRound& a, const Resource& r) const {
  HoldPlace p = table_.PlaceOf(a.name, r, a.mode, a.part);
  p.record = a.note;
  // A claim after a grant here (a lock contended through this agent) may find this agent's own
  // reservation, which only the script takes: a SET NX first would cost a refused command.
  if (r.granted_here || (p.native_claims && Clock::now() >= native_until_)) {
    p.native_claims = false;
  }
  return p;
}

AttemptCall LockEngine::CallOf(const AttemptRound& a, const Resource& r,
                               const HoldPlace& place) const {
  const Waiter& w = r.waiters.front();
  const bool turns = turns_.Take(r.kind(), a.mode);
  return {place,
          a.token,
          a.waiter_id,
          a.attempt,
          w.history.ttl_ms,
          w.history.fence ? fence_quorum_ : 0,
          turns_.WaitingTtlMs(),
          options_.value_prefix,
          turns ? CeilMs(Clock::now() - w.requested) : -1,
          turns && a.ask_others};
}

void LockEngine::Refuse(Failure failure, AcquireDone done) {
  stats_->AcquireAnswered(AcquireOutcome::kError, {}, 0);
  events_->AcquireFinished(AcquireOutcome::kError, {}, 0);
  Defer([done = std::move(done), failure = std::move(failure)] { done(failure); });
}

void LockEngine::Acquire(SessionId session, const std::string& name, int64_t ttl_ms,
                         int64_t wait_ms, bool renew, AcquireDone done, bool fence,
                         AcquireKind kind) {
  const Resource* existing = Find(name);
  if (shutting_down_) return Refuse(ShuttingDown(/*retry_hint=*/true), std::move(done));
  if (existing != nullptr && !(existing->shape == kind.shape)) {
    return Refuse(KindMismatch(name, kind.shape.WithArticle(),
                               existing->shape.WithArticle() + " through this agent"),
                  std::move(done));
  }
  if (existing != nullptr) {
    const HoldMode mode = existing->kind().ModeAsked(kind.shared);
    if (kind.reentrant && mode == HoldMode::kExclusive) {
      if (Holder* again = OwnExclusiveHold(*existing, session, kind.owner)) {
        return Reenter(name, *again, std::move(done));
      }
    }
    if (auto failure = OwnHoldInTheWay(*existing, name, session, kind.owner, mode)) {
      return Refuse(std::move(*failure), std::move(done));
    }
  }
  if (options_.max_waiters_per_resource > 0) {
    const size_t queued = existing == nullptr ? 0 : existing->waiters.live();
    if (queued >= options_.max_waiters_per_resource) {
      return Refuse(TooManyQueued(queued), std::move(done));
    }
  }
  Resource& r = table_.Add(name, kind.shape);
  Waiter w;
  w.id = next_waiter_id_++;
  w.session = session;
  w.renew = renew;
  w.mode = r.kind().ModeAsked(kind.shared);
  w.hold_as = kind.hold_as;
  w.payload = std::move(kind.payload);
  w.owner = kind.owner;
  w.reentrant = kind.reentrant;
  w.history.ttl_ms = ttl_ms;
  w.history.wait_ms = wait_ms;
  w.history.fence = fence || r.kind().AlwaysFenced();
  w.requested = Clock::now();
  w.deadline = w.requested + std::chrono::milliseconds(wait_ms);
  w.done = std::move(done);
  SetDeadline(w.id, name, w.deadline);
  r.waiters.Push(std::move(w));
  table_.Queued(session, name);
  Pump(name);
}

bool LockEngine::FrontMayContend(const Resource& r) const {
  return r.holders.empty() || OnlyFleetLeasesHeld(r) ||
         r.kind().MayContendBeside(r.shape, r.waiters.front().mode, r.holders);
}

void LockEngine::Pump(const std::string& name) {
  Resource* r = Find(name);
  if (r == nullptr) return;
  if (r->attempt_in_flight || (r->retry_timer && r->retry_timer->active())) return;
  r->waiters.DropCancelledFront([this](const Waiter& w) { deadlines_.Erase(w.id); });
  if (r->waiters.empty()) {
    MaybeErase(name);
    return;
  }
  if (!FrontMayContend(*r)) return;
  StartAttempt(name);
}

void LockEngine::StartAttempt(const std::string& name) {
  Resource& r = *Find(name);
  Waiter& w = r.waiters.front();
  w.in_attempt = true;
  ++w.history.attempts;
  r.attempt_in_flight = true;
  const AttemptRound a{name,
                       w.id,
                       NewToken(),
                       w.mode,
                       r.kind().ChoosePart(r.shape, r.kind_state, r.holders, rng_),
                       w.history.attempts,
                       std::string(),
                       // Asked only where a local waiter may want the lock handed over: an
                       // uncontended claim costs the master no more than without turns.
                       turns_.Take(r.kind(), w.mode) && r.waiters.live() > 1};
  const HoldPlace place = PlaceOf(a, r);
  RoundRequest req = r.kind().AcquireRound(CallOf(a, r, place), r.kind_state);
  rounds_.Run(std::move(req), [this, a](const RoundResult& res) {
    OnAttempt(a, res, res.started, res.max_fence, /*fence_written=*/false);
  });
}

void LockEngine::WriteFence(const AttemptRound& a, Clock::time_point started, int64_t fence) {
  Resource& r = *Find(a.name);
  r.attempt_in_flight = true;
  r.waiters.front().in_attempt = true;
  AttemptRound b = a;
  const HoldPlace place = PlaceOf(a, r);
  RoundRequest req = r.kind().FenceRound(CallOf(a, r, place), fence, UnixMsNow(),
                                         r.waiters.front().payload, &b.note);
  rounds_.Run(std::move(req), [this, b = std::move(b), started, fence](const RoundResult& res) {
    CountFenceWrite(*stats_, res, b.name, fence);
    OnAttempt(b, res, started, fence, /*fence_written=*/true);
  });
}

void LockEngine::OnAttempt(const AttemptRound& a, const RoundResult& res,
                           Clock::time_point started, int64_t fence, bool fence_written) {
  const std::string& name = a.name;
  const VoteTally& tally = res.tally;
  Resource* r = Find(name);
  if (r == nullptr || r->waiters.empty() || r->waiters.front().id != a.waiter_id) {
    spdlog::error("internal: acquire attempt for {} finished without its waiter", Quoted(name));
    if (r != nullptr) UndoAttempt(a, *r, /*giving_up=*/true);
    return;
  }
  r->attempt_in_flight = false;
  Waiter& w = r->waiters.front();
  w.in_attempt = false;
  w.history.last_tally = tally;
  w.history.last_in_fence_phase = fence_written;
  r->kind().Heard(res, r->kind_state, w.id);
  const bool turns = turns_.Take(r->kind(), w.mode);
  const auto now = Clock::now();
  const int64_t validity =
      ValidityMs(w.history.ttl_ms, CeilMs(now - started), options_.drift_factor);
  w.history.last_too_slow = tally.Won() && validity <= 0;
  if (tally.Won() && validity > 0 && !w.cancelled && !shutting_down_) {
    if (turns) Turns::AttemptEnded(r->turns, tally);
    if (!fence_written) Turns::GrantHeard(r->turns, a.ask_others, res);
    if (w.history.fence && !fence_written) {
      WriteFence(a, started, NextFence(fence));
      return;
    }
    // validity is what is left as of now (ttl - elapsed - drift): count it from here.
    GrantHead(*r, name, a, started, now + std::chrono::milliseconds(validity),
              w.history.fence ? std::optional<int64_t>(fence) : std::nullopt);
    return;
  }
  const int64_t remaining = CeilMs(w.deadline - now);
  const RefusalReading reading =
      r->kind().Refused(res, r->shape, r->kind_state, w.id, rounds_.quorum(),
                        /*may_retry_now=*/!w.cancelled && !shutting_down_);
  w.history.last_refusal = reading.why;
  if (turns && !reading.retry_now) Turns::AttemptEnded(r->turns, tally);
  const bool giving_up = !reading.retry_now && (w.cancelled || shutting_down_ ||
                                                reading.foreign || w.expired || remaining <= 0);
  // Undo on every master, including those that said no or did not answer in time: a late
  // "OK" is undone too, because the DEL is queued behind the SET on the same connection.
  UndoAttempt(a, *r, giving_up);
  if (reading.retry_now) {
    StartAttempt(name);
    return;
  }
  if (w.cancelled) {
    deadlines_.Erase(w.id);
    r->waiters.PopFront();
    Pump(name);
    return;
  }
  if (shutting_down_) {
    FailHead(*r, name, ShuttingDown(/*retry_hint=*/false));
    return;
  }
  if (reading.foreign) {
    FailHead(*r, name, KindMismatch(name, r->shape.WithArticle(), *reading.foreign));
    return;
  }
  if (w.expired || remaining <= 0) {
    FailHead(*r, name, AcquireFailure(name, w.history, rounds_.size()));
    return;
  }
  RetryLater(*r, name, w, remaining);
}

void LockEngine::UndoAttempt(const AttemptRound& a, Resource& r, bool giving_up) {
  const HoldPlace place = PlaceOf(a, r);
  // The front waiter may be gone: the call is built from the attempt alone.
  const AttemptCall call{place, a.token, a.waiter_id, a.attempt, 0, 0, 0, options_.value_prefix};
  ReleaseEverywhere(r.kind().UndoRound(call, r.kind_state, giving_up));
}

void LockEngine::RetryLater(Resource& r, const std::string& name, const Waiter& w,
                            int64_t remaining_ms, int64_t delay_ms) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int64_t delay = std::min(
      delay_ms >= 0 ? delay_ms
                    : RetryDelayMs(options_.retry_delay_ms, options_.retry_jitter_ms, unit(rng_)),
      remaining_ms);
  if (!r.retry_timer) r.retry_timer = std::make_unique<Timer>(loop_);
  r.retry_timer->Start(delay, [this, name] { Pump(name); });
  // Held elsewhere: listen for its release so that the retry need not wait for the timer.
  if (options_.release_watch != nullptr && !r.watched && w.history.last_tally &&
      w.history.last_tally->no() > 0) {
    r.watched = true;
    options_.release_watch->Watch(KeyOf(name));
  }
}

bool LockEngine::ReleasedElsewhere(const std::string& key) {
  if (!key.starts_with(options_.key_prefix)) return false;
  const std::string name = key.substr(options_.key_prefix.size());
  Resource* r = Find(name);
  if (r == nullptr || r->attempt_in_flight || !r->retry_timer || !r->retry_timer->active()) {
    return false;  // nobody here is backing off for it
  }
  r->retry_timer->Stop();
  stats_->release_wakeups.Inc();
  Pump(name);
  return true;
}

Holder& LockEngine::Install(Resource& r, const std::string& name, const Waiter& w,
                            HoldMode mode, int part, Clock::time_point acquired) {
  auto h = std::make_unique<Holder>();
  h->acquired = acquired;
  h->serial = w.id;  // its wait deadline is replaced by the holder's
  h->session = w.hold_as != 0 ? w.hold_as : w.session;
  h->kept = w.hold_as != 0;
  h->ttl_ms = w.history.ttl_ms;
  h->renew = w.renew;
  h->mode = mode;
  h->part = static_cast<int16_t>(part);
  h->owner = w.owner;
  stats_->holds[mode].Inc();
  ForgetWaiter(w.session, name);
  return table_.Install(r, name, std::move(h));
}

void LockEngine::GrantHead(Resource& r, const std::string& name, const AttemptRound& a,
                           Clock::time_point started, Clock::time_point valid_until,
                           std::optional<int64_t> fence) {
  const auto now = Clock::now();
  const int64_t validity_ms = MsLeft(valid_until, now);
  if (validity_ms <= 0) {
    UndoAttempt(a, r, /*giving_up=*/true);
    FailHead(r, name, ValidityRanOutBeforeReply());
    return;
  }
  const HoldPlace place = PlaceOf(a, r);
  if (auto cleanup = r.kind().Granted(CallOf(a, r, place), r.kind_state)) {
    ReleaseEverywhere(std::move(*cleanup));
  }
  Waiter w = r.waiters.PopFront();
  r.granted_here = true;
  LeaveQueue(name, r);  // this agent's next waiters wait here, behind the holder
  Holder& h = Install(r, name, w, a.mode, a.part, started);
  h.token = FixedToken(a.token);
  h.fence = fence;
  if (!a.note.empty()) h.note = std::make_unique<std::string>(a.note);
  h.valid_until = valid_until;
  DropStaleLeases(r, name, h);
  ScheduleHolder(name, h, RenewDelayMs(w.renew, w.history.ttl_ms, validity_ms));
  spdlog::debug("granted {} (validity {} ms, waited {} ms, {} attempt(s){})", Quoted(name),
                validity_ms, CeilMs(now - w.requested), w.history.attempts,
                fence ? ", fence " + std::to_string(*fence) : std::string());
  AnswerGrant(w, name, h, validity_ms, now);
  Pump(name);  // the next local waiter may contend beside it, if its kind allows
}

void LockEngine::AnswerGrant(Waiter& w, const std::string& name, const Holder& h,
                             int64_t validity_ms, Clock::time_point now) {
  const int64_t waited = CeilMs(now - w.requested);
  stats_->grant_wait[h.mode].ObserveSeconds(now - w.requested);
  Report(w, name, /*granted=*/true, ErrorCode::kInternal);
  // Answered now, never deferred: a deferred reply could follow a revoke or shutdown that
  // took the lock in between and tell the waiter it holds what it no longer does.
  w.done(Grant{h.token.str(), validity_ms, waited, h.fence, h.part, h.mode, h.serial,
               w.reentrant ? h.depth : 0});
}

void LockEngine::FailHead(Resource& r, const std::string& name, Failure failure) {
  Waiter w = r.waiters.PopFront();
  deadlines_.Erase(w.id);
  if (r.retry_timer) r.retry_timer->Stop();
  ForgetWaiter(w.session, name);
  AnswerFailure(w, name, failure);
  Pump(name);
}

void LockEngine::AnswerFailure(Waiter& w, const std::string& name, const Failure& failure) {
  Report(w, name, /*granted=*/false, failure.code);
  w.done(failure);
}

void LockEngine::Report(const Waiter& w, const std::string& name, bool granted, ErrorCode code) {
  const AcquireOutcome outcome = OutcomeOf(granted, code);
  const auto waited = Clock::now() - w.requested;
  stats_->AcquireAnswered(outcome, waited, w.history.attempts);
  events_->AcquireFinished(outcome, waited, w.history.attempts);
  if (!granted) events_->AcquireFailed(w.session, name, code);
}

void LockEngine::OnWaitExpired(const std::string& name, uint64_t waiter_id) {
  Resource* r = Find(name);
  if (r == nullptr) return;
  Waiter* w = r->waiters.Find(waiter_id);
  if (w == nullptr || w->cancelled) return;
  if (w == &r->waiters.front()) {
    if (w->in_attempt) {
      w->expired = true;  // the attempt in flight decides
      return;
    }
    FailHead(*r, name, AcquireFailure(name, w->history, rounds_.size()));
    return;
  }
  Waiter queued = *r->waiters.Take(waiter_id);
  deadlines_.Erase(queued.id);
  ForgetWaiter(queued.session, name);
  AnswerFailure(queued, name, QueuedTooLong(name, queued.history.wait_ms));
}

}  // namespace lw
