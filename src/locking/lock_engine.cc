// LockEngine: construction and the acquire path (waiting, attempts, fencing, grants).
#include "locking/lock_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/redlock_math.h"
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
      rng_(std::random_device{}()),
      deadlines_(loop, [this](uint64_t serial, const std::string& name) { OnDeadline(serial, name); }),
      defer_(loop) {}

LockEngine::~LockEngine() = default;

void LockEngine::Defer(std::function<void()> fn) {
  deferred_.push_back(std::move(fn));
  if (defer_.active()) return;
  defer_.Start(0, [this] {
    auto batch = std::move(deferred_);
    deferred_.clear();
    for (auto& f : batch) f();
  });
}

// Not stored per resource: at 100k held locks a second copy of every name is ~6 MiB.
std::string LockEngine::KeyOf(const std::string& name) const { return options_.key_prefix + name; }

FencedKeys LockEngine::FencedKeysOf(const std::string& name) const {
  return {KeyOf(name), options_.fence_prefix + name};
}

LockEngine::Resource* LockEngine::Find(const std::string& name) {
  auto it = resources_.find(name);
  return it == resources_.end() ? nullptr : it->second.get();
}

Holder* LockEngine::FindHolder(const std::string& name, const std::string& token) {
  Resource* r = Find(name);
  if (r == nullptr || !r->holder || !(r->holder->token == token)) return nullptr;
  return r->holder.get();
}

void LockEngine::Acquire(SessionId session, const std::string& name, int64_t ttl_ms,
                         int64_t wait_ms, bool renew, AcquireDone done, bool fence) {
  std::optional<Failure> refused;
  if (shutting_down_) {
    refused = ShuttingDown(/*retry_hint=*/true);
  } else if (options_.max_waiters_per_resource > 0) {
    const Resource* existing = Find(name);
    const size_t queued = existing == nullptr ? 0 : existing->waiters.live();
    if (queued >= options_.max_waiters_per_resource) refused = TooManyQueued(queued);
  }
  if (refused) {
    stats_->AcquireAnswered(AcquireOutcome::kError, {}, 0);
    events_->AcquireFinished(AcquireOutcome::kError, {}, 0);
    Defer([done = std::move(done), failure = std::move(*refused)] { done(failure); });
    return;
  }
  auto& slot = resources_[name];
  if (!slot) slot = std::make_unique<Resource>();
  Waiter w;
  w.id = next_waiter_id_++;
  w.session = session;
  w.renew = renew;
  w.history.ttl_ms = ttl_ms;
  w.history.wait_ms = wait_ms;
  w.history.fence = fence;
  w.requested = Clock::now();
  w.deadline = w.requested + std::chrono::milliseconds(wait_ms);
  w.done = std::move(done);
  SetDeadline(w.id, name, w.deadline);
  slot->waiters.Push(std::move(w));
  ++sessions_[session].waiting[name];
  Pump(name);
}

void LockEngine::Pump(const std::string& name) {
  Resource* r = Find(name);
  if (r == nullptr) return;
  if (r->holder || r->attempt_in_flight || (r->retry_timer && r->retry_timer->active())) return;
  r->waiters.DropCancelledFront([this](const Waiter& w) { deadlines_.Erase(w.id); });
  if (r->waiters.empty()) {
    MaybeErase(name);
    return;
  }
  StartAttempt(name);
}

void LockEngine::StartAttempt(const std::string& name) {
  Resource& r = *Find(name);
  Waiter& w = r.waiters.front();
  w.in_attempt = true;
  ++w.history.attempts;
  r.attempt_in_flight = true;
  AttemptRound a{name, w.id, NewToken()};
  RoundRequest req;
  if (w.history.fence) {
    req = FencePhase1(FencedKeysOf(name), a.token, w.history.ttl_ms, fence_quorum_);
  } else {
    req.op = RoundOp::kSetIfAbsent;
    req.key = KeyOf(name);
    req.token = a.token;
    req.ttl_ms = w.history.ttl_ms;
  }
  rounds_.Run(std::move(req), [this, a](const RoundResult& res) {
    OnAttempt(a, res.tally, res.started, res.max_fence, /*fence_written=*/false);
  });
}

void LockEngine::WriteFence(const AttemptRound& a, Clock::time_point started, int64_t fence) {
  Resource& r = *Find(a.name);
  r.attempt_in_flight = true;
  r.waiters.front().in_attempt = true;
  rounds_.Run(FencePhase2(FencedKeysOf(a.name), a.token, fence, fence_quorum_),
              [this, a, started, fence](const RoundResult& res) {
                CountFenceWrite(*stats_, res, a.name, fence);
                OnAttempt(a, res.tally, started, fence, /*fence_written=*/true);
              });
}

void LockEngine::OnAttempt(const AttemptRound& a, const VoteTally& tally,
                           Clock::time_point started, int64_t fence, bool fence_written) {
  const std::string& name = a.name;
  Resource* r = Find(name);
  if (r == nullptr || r->waiters.empty() || r->waiters.front().id != a.waiter_id) {
    spdlog::error("internal: acquire attempt for {} finished without its waiter", Quoted(name));
    ReleaseEverywhere(KeyOf(name), a.token);
    return;
  }
  r->attempt_in_flight = false;
  Waiter& w = r->waiters.front();
  w.in_attempt = false;
  w.history.last_tally = tally;
  w.history.last_in_fence_phase = fence_written;
  const auto now = Clock::now();
  const int64_t validity =
      ValidityMs(w.history.ttl_ms, CeilMs(now - started), options_.drift_factor);
  w.history.last_too_slow = tally.Won() && validity <= 0;
  if (tally.Won() && validity > 0 && !w.cancelled && !shutting_down_) {
    if (w.history.fence && !fence_written) {
      WriteFence(a, started, NextFence(fence));
      return;
    }
    // validity is what is left as of now (ttl - elapsed - drift): count it from here.
    GrantHead(*r, name, a.token, started, now + std::chrono::milliseconds(validity),
              w.history.fence ? std::optional<int64_t>(fence) : std::nullopt);
    return;
  }
  // Undo on every master, including those that said no or did not answer in time: a late
  // "OK" is undone too, because the DEL is queued behind the SET on the same connection.
  ReleaseEverywhere(KeyOf(name), a.token);
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
  const int64_t remaining = CeilMs(w.deadline - now);
  if (w.expired || remaining <= 0) {
    FailHead(*r, name, AcquireFailure(name, w.history, rounds_.size()));
    return;
  }
  RetryLater(*r, name, w, remaining);
}

void LockEngine::RetryLater(Resource& r, const std::string& name, const Waiter& w,
                            int64_t remaining_ms) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int64_t delay = std::min(
      RetryDelayMs(options_.retry_delay_ms, options_.retry_jitter_ms, unit(rng_)), remaining_ms);
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
  if (r == nullptr || r->holder || r->attempt_in_flight || !r->retry_timer ||
      !r->retry_timer->active()) {
    return false;  // nobody here is backing off for it
  }
  r->retry_timer->Stop();
  stats_->release_wakeups.Inc();
  Pump(name);
  return true;
}

Holder& LockEngine::Install(Resource& r, const std::string& name, const Waiter& w) {
  auto h = std::make_unique<Holder>();
  h->serial = w.id;  // its wait deadline is replaced by the holder's
  h->session = w.session;
  h->ttl_ms = w.history.ttl_ms;
  h->renew = w.renew;
  r.holder = std::move(h);
  ++holders_;
  ForgetWaiter(w.session, name);
  sessions_[w.session].held.push_back(name);
  return *r.holder;
}

void LockEngine::GrantHead(Resource& r, const std::string& name, const std::string& token,
                           Clock::time_point started, Clock::time_point valid_until,
                           std::optional<int64_t> fence) {
  const int64_t validity_ms = MsLeft(valid_until, Clock::now());
  if (validity_ms <= 0) {
    ReleaseEverywhere(KeyOf(name), token);
    FailHead(r, name, ValidityRanOutBeforeReply());
    return;
  }
  Waiter w = r.waiters.PopFront();
  Holder& h = Install(r, name, w);
  h.token = FixedToken(token);
  h.fence = fence;
  h.acquired = started;
  h.valid_until = valid_until;
  ScheduleHolder(name, h, RenewDelayMs(w.renew, w.history.ttl_ms, validity_ms));
  spdlog::debug("granted {} (validity {} ms, waited {} ms, {} attempt(s){})", Quoted(name),
                validity_ms, CeilMs(Clock::now() - w.requested), w.history.attempts,
                fence ? ", fence " + std::to_string(*fence) : std::string());
  AnswerGrant(w, name, h, validity_ms);
}

void LockEngine::AnswerGrant(Waiter& w, const std::string& name, const Holder& h,
                             int64_t validity_ms) {
  const int64_t waited = CeilMs(Clock::now() - w.requested);
  Report(w, name, /*granted=*/true, ErrorCode::kInternal);
  // Answered now, never deferred: a deferred reply could follow a revoke or shutdown that
  // took the lock in between and tell the waiter it holds what it no longer does.
  w.done(Grant{h.token.str(), validity_ms, waited, h.fence});
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
