#include "locking/lock_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <list>

#include "core/redlock_math.h"
#include "core/token.h"

namespace lw {
namespace {

int64_t CeilMs(Clock::duration d) {
  return std::chrono::ceil<std::chrono::milliseconds>(d).count();
}

// Compare-and-delete on every master, waiting for every answer (or the node timeout).
RoundRequest DeleteRound(const std::string& key, const std::string& token) {
  RoundRequest req;
  req.op = RoundOp::kDeleteIfHeld;
  req.key = key;
  req.token = token;
  req.wait_all = true;
  return req;
}

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

struct LockEngine::Waiter {
  uint64_t id = 0;
  SessionId session = 0;
  int64_t ttl_ms = 0;
  int64_t wait_ms = 0;
  bool renew = false;
  bool fence = false;
  Clock::time_point requested, deadline;
  AcquireDone done;
  bool in_attempt = false;
  bool cancelled = false;  // its session closed while its attempt was in flight
  bool expired = false;    // wait_ms ran out while its attempt was in flight
  int attempts = 0;
  std::optional<VoteTally> last_tally;  // of the last round of the last attempt
  bool last_too_slow = false;  // the last attempt won its votes but had no validity left
  bool last_in_fence_phase = false;  // the last attempt failed writing its fence
};

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

struct LockEngine::Holder {
  uint64_t serial = 0;  // its deadline's key in timed_ (the id it had as a waiter)
  SessionId session = 0;
  FixedToken token;  // the client's: identifies this grant
  // The value of the key on the masters when it differs from token: a grant handed over
  // locally (LocalHandOff) keeps its predecessor's key and value. Null: the key holds token.
  std::unique_ptr<FixedToken> lease;
  int64_t ttl_ms = 0;
  bool renew = false;
  std::optional<int64_t> fence;
  Clock::time_point acquired, valid_until;
  bool renewing = false;
  // Extend rounds (client extends and renewals) not yet answered: while one is, the key's
  // expiry on the masters may still change, so the lock is not handed over locally.
  uint16_t extends_in_flight = 0;
};

struct LockEngine::Resource {
  std::unique_ptr<Holder> holder;
  // FIFO; only the front contends on Redis. A list, not a deque: an empty std::deque still
  // allocates about half a KiB, and almost every held lock has no waiter.
  std::list<Waiter> waiters;
  std::unique_ptr<Timer> retry_timer;
  bool attempt_in_flight = false;
  bool watched = false;  // release announcements of this key are being listened to
};

LockEngine::LockEngine(uv_loop_t* loop, std::vector<Node*> nodes, EngineOptions options,
                       LostHandler on_lost)
    : loop_(loop),
      options_(std::move(options)),
      observer_(options_.observer ? options_.observer : &SilentEngineObserver()),
      on_lost_(std::move(on_lost)),
      rounds_(loop, std::move(nodes), options_.node_timeout_ms, observer_),
      fence_quorum_(options_.fence_quorum > 0 ? options_.fence_quorum
                                              : FenceQuorumSize(rounds_.size())),
      rng_(std::random_device{}()),
      deadlines_(
          loop, [this](uint64_t serial, Clock::time_point due) { OnDeadline(serial, due); },
          [this](uint64_t serial, Clock::time_point due) {
            auto it = timed_.find(serial);
            return it != timed_.end() && it->second.due == due;
          },
          [this] { return timed_.size(); }),
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

LockEngine::Resource* LockEngine::Find(const std::string& name) {
  auto it = resources_.find(name);
  return it == resources_.end() ? nullptr : it->second.get();
}

LockEngine::Holder* LockEngine::FindHolder(const std::string& name, const std::string& token) {
  Resource* r = Find(name);
  if (r == nullptr || !r->holder || !(r->holder->token == token)) return nullptr;
  return r->holder.get();
}

std::string LockEngine::LeaseOf(const Holder& h) {
  return h.lease ? h.lease->str() : h.token.str();
}

// ---- acquire ----------------------------------------------------------------------------

void LockEngine::Acquire(SessionId session, const std::string& name, int64_t ttl_ms,
                         int64_t wait_ms, bool renew, AcquireDone done, bool fence) {
  if (shutting_down_) {
    observer_->AcquireFinished(AcquireOutcome::kError, {}, 0);
    Defer([done = std::move(done)] {
      done(Failure{ErrorCode::kShuttingDown, "the agent is shutting down; retry shortly"});
    });
    return;
  }
  if (options_.max_waiters_per_resource > 0) {
    const Resource* existing = Find(name);
    const size_t queued =
        existing == nullptr
            ? 0
            : static_cast<size_t>(std::count_if(existing->waiters.begin(), existing->waiters.end(),
                                                 [](const Waiter& w) { return !w.cancelled; }));
    if (queued >= options_.max_waiters_per_resource) {
      observer_->AcquireFinished(AcquireOutcome::kError, {}, 0);
      Defer([done = std::move(done), queued] {
        done(Failure{ErrorCode::kTooMany,
                     std::to_string(queued) + " acquires of this resource are already queued "
                                              "on this agent (max_waiters_per_resource); retry "
                                              "later"});
      });
      return;
    }
  }
  auto& slot = resources_[name];
  if (!slot) slot = std::make_unique<Resource>();
  Waiter w;
  w.id = next_waiter_id_++;
  w.session = session;
  w.ttl_ms = ttl_ms;
  w.wait_ms = wait_ms;
  w.renew = renew;
  w.fence = fence;
  w.requested = Clock::now();
  w.deadline = w.requested + std::chrono::milliseconds(wait_ms);
  w.done = std::move(done);
  SetDeadline(w.id, name, w.deadline);
  slot->waiters.push_back(std::move(w));
  ++sessions_[session].waiting[name];
  Pump(name);
}

void LockEngine::Pump(const std::string& name) {
  Resource* r = Find(name);
  if (r == nullptr) return;
  if (r->holder || r->attempt_in_flight || (r->retry_timer && r->retry_timer->active())) return;
  while (!r->waiters.empty() && r->waiters.front().cancelled) {
    timed_.erase(r->waiters.front().id);
    r->waiters.pop_front();
  }
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
  ++w.attempts;
  r.attempt_in_flight = true;
  const std::string token = NewToken();
  RoundRequest req;
  req.op = w.fence ? RoundOp::kSetIfAbsentReadFence : RoundOp::kSetIfAbsent;
  req.key = KeyOf(name);
  req.token = token;
  req.ttl_ms = w.ttl_ms;
  if (w.fence) {
    req.fence_key = options_.fence_prefix + name;
    req.needed = fence_quorum_;
  }
  rounds_.Run(std::move(req), [this, name, id = w.id, token](const RoundResult& res) {
    OnAttempt(name, id, token, res.tally, res.started, res.max_fence, /*fence_written=*/false);
  });
}

void LockEngine::WriteFence(const std::string& name, uint64_t waiter_id, const std::string& token,
                            Clock::time_point started, int64_t fence) {
  Resource& r = *Find(name);
  r.attempt_in_flight = true;
  r.waiters.front().in_attempt = true;
  RoundRequest req;
  req.op = RoundOp::kRaiseFenceIfHeld;
  req.key = KeyOf(name);
  req.token = token;
  req.fence_key = options_.fence_prefix + name;
  req.fence = fence;
  req.needed = fence_quorum_;
  rounds_.Run(std::move(req), [this, name, waiter_id, token, started,
                               fence](const RoundResult& res) {
    observer_->FenceRound(res.tally.Won() ? FenceOutcome::kWritten : FenceOutcome::kNotConfirmed);
    if (res.fence_refused > 0) {
      observer_->FenceRound(FenceOutcome::kCounterAhead);
      // Only possible if a counter was raised outside lockwarden, or a master that confirmed
      // an earlier fence lost its data while others did too (docs/safety.md).
      spdlog::error("fence {} for {} refused by {} master(s) whose counter was already at or "
                    "above it; not granted with that fence",
                    fence, Quoted(name), res.fence_refused);
    }
    OnAttempt(name, waiter_id, token, res.tally, started, fence, /*fence_written=*/true);
  });
}

void LockEngine::OnAttempt(const std::string& name, uint64_t waiter_id, const std::string& token,
                           const VoteTally& tally, Clock::time_point started, int64_t fence,
                           bool fence_written) {
  Resource* r = Find(name);
  if (r == nullptr || r->waiters.empty() || r->waiters.front().id != waiter_id) {
    spdlog::error("internal: acquire attempt for {} finished without its waiter", Quoted(name));
    ReleaseEverywhere(options_.key_prefix + name, token);
    return;
  }
  r->attempt_in_flight = false;
  Waiter& w = r->waiters.front();
  w.in_attempt = false;
  w.last_tally = tally;
  w.last_in_fence_phase = fence_written;
  const auto now = Clock::now();
  const int64_t validity = ValidityMs(w.ttl_ms, CeilMs(now - started), options_.drift_factor);
  w.last_too_slow = tally.Won() && validity <= 0;
  if (tally.Won() && validity > 0 && !w.cancelled && !shutting_down_) {
    if (w.fence && !fence_written) {
      WriteFence(name, waiter_id, token, started, std::max<int64_t>(fence, 0) + 1);
      return;
    }
    GrantHead(*r, name, token, started, now, validity,
              w.fence ? std::optional<int64_t>(fence) : std::nullopt);
    return;
  }
  // Undo on every master, including those that said no or did not answer in time: a late
  // "OK" is undone too, because the DEL is queued behind the SET on the same connection.
  ReleaseEverywhere(KeyOf(name), token);
  if (w.cancelled) {
    timed_.erase(w.id);
    r->waiters.pop_front();
    Pump(name);
    return;
  }
  if (shutting_down_) {
    FailHead(*r, name, Failure{ErrorCode::kShuttingDown, "the agent is shutting down"});
    return;
  }
  const int64_t remaining = CeilMs(w.deadline - now);
  if (w.expired || remaining <= 0) {
    FailHead(*r, name, AttemptFailure(name, w));
    return;
  }
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int64_t delay = std::min(
      RetryDelayMs(options_.retry_delay_ms, options_.retry_jitter_ms, unit(rng_)), remaining);
  if (!r->retry_timer) r->retry_timer = std::make_unique<Timer>(loop_);
  r->retry_timer->Start(delay, [this, name] { Pump(name); });
  // Held elsewhere: listen for its release so that the retry need not wait for the timer.
  if (options_.release_watch != nullptr && !r->watched && w.last_tally &&
      w.last_tally->no() > 0) {
    r->watched = true;
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
  Pump(name);
  return true;
}

void LockEngine::GrantHead(Resource& r, const std::string& name, const std::string& token,
                           Clock::time_point started, Clock::time_point decided,
                           int64_t validity_ms, std::optional<int64_t> fence) {
  Waiter w = std::move(r.waiters.front());
  r.waiters.pop_front();
  auto h = std::make_unique<Holder>();
  h->serial = w.id;  // its wait deadline is replaced by the holder's below
  h->session = w.session;
  h->token = FixedToken(token);
  h->ttl_ms = w.ttl_ms;
  h->renew = w.renew;
  h->fence = fence;
  h->acquired = started;
  // validity_ms is what is left as of the decision (ttl - elapsed - drift): count it from
  // there, i.e. started + ttl - drift, not from `started` (that would subtract elapsed twice).
  h->valid_until = decided + std::chrono::milliseconds(validity_ms);
  r.holder = std::move(h);
  ++holders_;
  ForgetWaiter(w.session, name);
  sessions_[w.session].held.push_back(name);
  ScheduleHolder(name, *r.holder, w.renew ? std::min(w.ttl_ms / 3, validity_ms) : validity_ms);
  const int64_t waited = CeilMs(Clock::now() - w.requested);
  spdlog::debug("granted {} (validity {} ms, waited {} ms, {} attempt(s){})", Quoted(name),
                validity_ms, waited, w.attempts,
                fence ? ", fence " + std::to_string(*fence) : std::string());
  ReportAcquire(w, name, ErrorCode::kInternal, /*granted=*/true);
  w.done(Grant{token, validity_ms, waited, fence, r.holder->valid_until});
}

void LockEngine::FailHead(Resource& r, const std::string& name, Failure failure) {
  Waiter w = std::move(r.waiters.front());
  r.waiters.pop_front();
  timed_.erase(w.id);
  if (r.retry_timer) r.retry_timer->Stop();
  ForgetWaiter(w.session, name);
  ReportAcquire(w, name, failure.code, /*granted=*/false);
  w.done(failure);
  Pump(name);
}

void LockEngine::ReportAcquire(const Waiter& w, const std::string& name, ErrorCode code,
                               bool granted) {
  AcquireOutcome outcome = AcquireOutcome::kError;
  if (granted) {
    outcome = AcquireOutcome::kAcquired;
  } else if (code == ErrorCode::kTimeout) {
    outcome = AcquireOutcome::kTimeout;
  } else if (code == ErrorCode::kNoQuorum) {
    outcome = AcquireOutcome::kNoQuorum;
  }
  observer_->AcquireFinished(outcome, Clock::now() - w.requested, w.attempts);
  if (!granted) observer_->AcquireFailed(w.session, name, code);
}

Failure LockEngine::AttemptFailure(const std::string& name, const Waiter& w) const {
  if (w.attempts == 0 || !w.last_tally) {
    return {ErrorCode::kTimeout, Quoted(name) + " was held by another session of this agent for "
                                 "all of wait_ms=" + std::to_string(w.wait_ms)};
  }
  if (w.last_too_slow) {
    return {ErrorCode::kNoQuorum,
            "a quorum of masters said yes, but too slowly: no validity was left of ttl_ms=" +
                std::to_string(w.ttl_ms) + "; raise ttl_ms or check master latency"};
  }
  const VoteTally& t = *w.last_tally;
  // Enough masters answered that, had the key been free, the attempt would have been won.
  if (t.answered() >= t.needed() && t.counting_answered() >= t.quorum()) {
    return {ErrorCode::kTimeout, Quoted(name) + " stayed held by another owner for all of "
                                 "wait_ms=" + std::to_string(w.wait_ms) + " (" +
                                 std::to_string(w.attempts) + " attempt(s))"};
  }
  const std::string n = std::to_string(rounds_.size());
  if (rounds_.size() - t.not_counting() < t.quorum()) {
    return {ErrorCode::kNoQuorum,
            std::to_string(t.not_counting()) + " of " + n + " masters are in restart quarantine "
            "(they started less than max_ttl_ms ago and may have forgotten locks), so only " +
                std::to_string(rounds_.size() - t.not_counting()) + " can count toward quorum (" +
                std::to_string(t.quorum()) + "); see `lockwarden status` for when each counts "
                "again"};
  }
  std::string message = "only " + std::to_string(t.answered()) + " of " + n +
                        " masters answered in time";
  if (w.last_in_fence_phase) {
    message = "only " + std::to_string(t.yes()) + " of " + n +
              " masters still held the key when its fence was written";
  }
  message += " (quorum is " + std::to_string(t.quorum());
  if (w.fence) message += "; a fenced grant needs " + std::to_string(t.needed()) + " of " + n;
  message += ")";
  if (t.failed() > 0 && !w.last_in_fence_phase) {
    // Otherwise "0 of 5 answered" reads like a timeout when 3 masters were simply down: the
    // round ends as soon as quorum is out of reach, before the live ones answer.
    message += "; " + std::to_string(t.failed()) + " could not be asked or failed (down, "
               "unreachable or an error reply)";
    if (t.outstanding() > 0) message += ", which ended the round before the others answered";
  }
  if (t.not_counting() > 0) {
    message += "; " + std::to_string(t.not_counting()) + " master(s) are in restart quarantine "
               "and do not count toward quorum until max_ttl_ms after their start";
  }
  return {ErrorCode::kNoQuorum, message + "; see `lockwarden status` for master health"};
}

void LockEngine::OnWaitExpired(const std::string& name, uint64_t waiter_id) {
  Resource* r = Find(name);
  if (r == nullptr) return;
  auto it = std::find_if(r->waiters.begin(), r->waiters.end(),
                         [&](const Waiter& w) { return w.id == waiter_id; });
  if (it == r->waiters.end() || it->cancelled) return;
  if (it == r->waiters.begin()) {
    if (it->in_attempt) {
      it->expired = true;  // the attempt in flight decides
      return;
    }
    FailHead(*r, name, AttemptFailure(name, *it));
    return;
  }
  Waiter w = std::move(*it);
  r->waiters.erase(it);
  timed_.erase(w.id);
  ForgetWaiter(w.session, name);
  ReportAcquire(w, name, ErrorCode::kTimeout, /*granted=*/false);
  w.done(Failure{ErrorCode::kTimeout, Quoted(name) + " was held by another session of this "
                                      "agent for all of wait_ms=" + std::to_string(w.wait_ms)});
}

// ---- release / extend / renew -------------------------------------------------------------

void LockEngine::Release(SessionId session, const std::string& name, const std::string& token,
                         ReleaseDone done) {
  Holder* h = FindHolder(name, token);
  if (h == nullptr || h->session != session) {
    Defer([done = std::move(done), name] {
      done(Failure{ErrorCode::kNotHeld, "this connection does not hold " + Quoted(name) +
                                            " with that token (released, expired, or never "
                                            "acquired here)"});
    });
    return;
  }
  Resource& r = *Find(name);
  auto holder = TakeHolder(r, name);
  if (LocalHandOff(r, name, *holder)) {
    Defer([done = std::move(done)] { done(std::nullopt); });
    return;
  }
  rounds_.Run(DeleteRound(KeyOf(name), LeaseOf(*holder)),
              [this, done = std::move(done)](const RoundResult&) {
                done(std::nullopt);
                MaybeFinishShutdown();
              });
  Pump(name);  // the next local waiter's SET is pipelined behind the delete
}

bool LockEngine::LocalHandOff(Resource& r, const std::string& name, const Holder& prev) {
  if (shutting_down_ || prev.fence || r.attempt_in_flight || prev.extends_in_flight > 0) {
    return false;
  }
  while (!r.waiters.empty() && r.waiters.front().cancelled && !r.waiters.front().in_attempt) {
    timed_.erase(r.waiters.front().id);
    r.waiters.pop_front();
  }
  if (r.waiters.empty()) return false;
  const Waiter& next = r.waiters.front();
  const auto now = Clock::now();
  const int64_t left_ms =
      std::chrono::floor<std::chrono::milliseconds>(prev.valid_until - now).count();
  // The masters' key was set (or last extended) for prev's ttl; the next holder gets what is
  // left of it, so only when that is most of what it asked for. Fenced grants need a new
  // fence from the masters.
  if (next.cancelled || next.in_attempt || next.fence || next.ttl_ms != prev.ttl_ms ||
      left_ms < next.ttl_ms / 2) {
    return false;
  }
  Waiter w = std::move(r.waiters.front());
  r.waiters.pop_front();
  if (r.retry_timer) r.retry_timer->Stop();
  auto h = std::make_unique<Holder>();
  h->serial = w.id;
  h->session = w.session;
  const std::string token = NewToken();
  h->token = FixedToken(token);
  h->lease = std::make_unique<FixedToken>(prev.lease ? *prev.lease : prev.token);
  h->ttl_ms = w.ttl_ms;
  h->renew = w.renew;
  h->acquired = now;
  h->valid_until = prev.valid_until;
  r.holder = std::move(h);
  ++holders_;
  ForgetWaiter(w.session, name);
  sessions_[w.session].held.push_back(name);
  // A renewal is due when two thirds of the ttl are left, as for a fresh grant.
  ScheduleHolder(name, *r.holder,
                 w.renew ? std::max<int64_t>(0, left_ms - 2 * w.ttl_ms / 3) : left_ms);
  observer_->LocalHandOff();
  const int64_t waited = CeilMs(now - w.requested);
  ReportAcquire(w, name, ErrorCode::kInternal, /*granted=*/true);
  // Answered now, as GrantHead does: deferred, the reply could follow a revoke or shutdown
  // that took the lock in between and tell the waiter it holds what it no longer does.
  w.done(Grant{token, left_ms, waited, std::nullopt, prev.valid_until});
  return true;
}

void LockEngine::Extend(SessionId session, const std::string& name, const std::string& token,
                        int64_t ttl_ms, ExtendDone done) {
  Holder* h = FindHolder(name, token);
  if (h == nullptr || h->session != session) {
    Defer([done = std::move(done), name] {
      done(Failure{ErrorCode::kNotHeld, "this connection does not hold " + Quoted(name) +
                                            " with that token"});
    });
    return;
  }
  RunExtend(name, token, ttl_ms,
            [this, name, token, done = std::move(done)](
                const std::variant<Extension, Failure>& result) {
              const auto* f = std::get_if<Failure>(&result);
              if (f && f->code == ErrorCode::kNotHeld && FindHolder(name, token)) {
                Resource& r = *Find(name);
                auto gone = TakeHolder(r, name);
                ReleaseEverywhere(KeyOf(name), LeaseOf(*gone));
                Pump(name);
              }
              done(result);
            });
}

void LockEngine::RunExtend(const std::string& name, const std::string& token, int64_t ttl_ms,
                           ExtendDone done, int64_t timeout_ms) {
  RoundRequest req;
  req.op = RoundOp::kExtendIfHeld;
  req.key = KeyOf(name);
  Holder* holder = FindHolder(name, token);  // callers hold it: non-null
  req.token = LeaseOf(*holder);
  ++holder->extends_in_flight;
  req.ttl_ms = ttl_ms;
  req.timeout_ms = timeout_ms;
  rounds_.Run(
      std::move(req), [this, name, token, ttl_ms, done = std::move(done)](const RoundResult& res) {
        const VoteTally& t = res.tally;
        const Clock::time_point started = res.started;
        Holder* h = FindHolder(name, token);
        if (h == nullptr) {
          done(Failure{ErrorCode::kNotHeld, Quoted(name) + " was released while extending"});
          MaybeFinishShutdown();
          return;
        }
        --h->extends_in_flight;
        const auto now = Clock::now();
        const int64_t validity = ValidityMs(ttl_ms, CeilMs(now - started), options_.drift_factor);
        if (t.Won() && validity > 0 && now < h->valid_until) {
          h->ttl_ms = ttl_ms;
          h->valid_until = now + std::chrono::milliseconds(validity);  // as in GrantHead
          ScheduleHolder(name, *h, h->renew ? std::min(ttl_ms / 3, validity) : validity);
          done(Extension{validity});
          return;
        }
        const std::string confirmed = std::to_string(t.counting_yes()) + " of " +
                                      std::to_string(rounds_.size()) + " masters confirmed";
        const std::string quarantined =
            t.not_counting() > 0 ? "; " + std::to_string(t.not_counting()) +
                                       " master(s) are in restart quarantine and do not count"
                                 : "";
        // Masters whose votes count said the key is not ours: quorum can never come back.
        if (now >= h->valid_until || t.counting_answered() - t.counting_yes() >= t.quorum()) {
          done(Failure{ErrorCode::kNotHeld, Quoted(name) + " could not be extended before its "
                                            "validity ran out (" + confirmed + quarantined +
                                            "); the lock is lost"});
          return;
        }
        done(Failure{ErrorCode::kNoQuorum,
                     "only " + confirmed + " the extension" + quarantined + " (quorum is " +
                         std::to_string(rounds_.quorum()) + "); the lock stays valid for " +
                         std::to_string(CeilMs(h->valid_until - now)) + " ms"});
      });
}

void LockEngine::ScheduleHolder(const std::string& name, Holder& h, int64_t delay_ms) {
  SetDeadline(h.serial, name, Clock::now() + std::chrono::milliseconds(std::max<int64_t>(delay_ms, 0)));
}

void LockEngine::SetDeadline(uint64_t serial, const std::string& name, Clock::time_point due) {
  if (shutting_down_) return;  // nothing is waited for or renewed any more
  auto [it, fresh] = timed_.try_emplace(serial);
  if (fresh) it->second.name = name;
  it->second.due = due;
  deadlines_.Add(due, serial);
}

void LockEngine::OnDeadline(uint64_t serial, Clock::time_point due) {
  auto it = timed_.find(serial);
  if (it == timed_.end() || it->second.due != due) return;  // gone, or moved to a later time
  const std::string name = std::move(it->second.name);
  timed_.erase(it);
  Resource* r = Find(name);
  if (r == nullptr) return;
  if (r->holder && r->holder->serial == serial) {
    const std::string token = r->holder->token.str();  // a copy: the holder may go while it runs
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
    Lose(name, h->renew ? "renew_failed" : "expired");
    return;
  }
  if (!h->renew || h->renewing) {
    ScheduleHolder(name, *h, CeilMs(h->valid_until - now));
    return;
  }
  if (renewals_in_flight_ >= kMaxRenewalsInFlight ||
      (!renew_backlog_.empty() && !draining_backlog_)) {
    // A wave of renewals (locks taken in a burst come due in a burst) waits for a slot
    // instead of all going out at once: memory and master queues stay bounded, and each
    // renewal is still sent within milliseconds. The loss is still reported on time.
    // Behind those already waiting: the oldest are the nearest to their validity's end.
    renew_backlog_.emplace_back(name, h->serial);
    ScheduleHolder(name, *h, CeilMs(h->valid_until - now));
    if (renewals_in_flight_ < kMaxRenewalsInFlight) Defer([this] { RenewBacklogged(); });
    return;
  }
  ++renewals_in_flight_;
  h->renewing = true;
  const int64_t left_ms = CeilMs(h->valid_until - now);
  // A renewal has until the validity ends, not a client waiting on it: give the masters up to
  // half of what is left (at least the node timeout, at most 2 s) before counting a master
  // out. Under a burst of renewals a short timeout would fail rounds whose answers are merely
  // queued, and the retries would deepen the queue.
  const int64_t timeout_ms =
      std::clamp<int64_t>(left_ms / 2, options_.node_timeout_ms, std::max<int64_t>(
                                                                    options_.node_timeout_ms, 2000));
  // The round ends (and reschedules) before the validity does, unless the node timeout alone
  // outlasts it: only then is a separate deadline needed to report the loss on time.
  if (timeout_ms >= left_ms) ScheduleHolder(name, *h, left_ms);
  RunExtend(name, token, h->ttl_ms,
            [this, name, token](const std::variant<Extension, Failure>& result) {
              --renewals_in_flight_;
              if (!renew_backlog_.empty()) Defer([this] { RenewBacklogged(); });
              Holder* h2 = FindHolder(name, token);
              if (h2 == nullptr) return;
              h2->renewing = false;
              const auto* f = std::get_if<Failure>(&result);
              if (f == nullptr) {  // extended; RunExtend scheduled the next renewal
                observer_->Renewed(RenewOutcome::kExtended);
                return;
              }
              if (f->code == ErrorCode::kNotHeld) {
                observer_->Renewed(RenewOutcome::kLost);
                Lose(name, "renew_failed");
                return;
              }
              observer_->Renewed(RenewOutcome::kRetry);
              WarnRenewalFailed(name, f->message);
              // Retry within the validity left, spread out: a fixed short delay would make
              // every lock of a struggling master retry in lockstep.
              const int64_t left = CeilMs(h2->valid_until - Clock::now());
              std::uniform_real_distribution<double> unit(0.0, 1.0);
              const int64_t delay = RetryDelayMs(std::max(options_.retry_delay_ms, left / 8),
                                                 options_.retry_jitter_ms, unit(rng_));
              ScheduleHolder(name, *h2, std::clamp<int64_t>(delay, 1, std::max<int64_t>(left, 1)));
            },
            timeout_ms);
}

void LockEngine::RenewBacklogged() {
  while (renewals_in_flight_ < kMaxRenewalsInFlight && !renew_backlog_.empty()) {
    auto [name, serial] = std::move(renew_backlog_.front());
    renew_backlog_.pop_front();
    Resource* r = Find(name);
    if (r == nullptr || !r->holder || r->holder->serial != serial || r->holder->renewing) continue;
    const std::string token = r->holder->token.str();
    draining_backlog_ = true;
    OnHolderTimer(name, token);  // renews now, or reports the loss if the validity ran out
    draining_backlog_ = false;
  }
}

void LockEngine::WarnRenewalFailed(const std::string& name, const std::string& why) {
  // One line per second at most: when a master majority is out, every renewed lock fails at
  // once and a line each would flood the log. The metric counts every retry.
  const auto now = Clock::now();
  if (now - last_renew_warning_ < std::chrono::seconds(1)) {
    ++renew_warnings_suppressed_;
    return;
  }
  if (renew_warnings_suppressed_ > 0) {
    spdlog::warn("renewal of {} failed: {} (and {} other renewal failure(s) in the last {} ms)",
                 Quoted(name), why, renew_warnings_suppressed_,
                 CeilMs(now - last_renew_warning_));
  } else {
    spdlog::warn("renewal of {} failed: {}", Quoted(name), why);
  }
  last_renew_warning_ = now;
  renew_warnings_suppressed_ = 0;
}

void LockEngine::Lose(const std::string& name, std::string_view reason) {
  Resource* r = Find(name);
  if (r == nullptr || !r->holder) return;
  auto h = TakeHolder(*r, name);
  spdlog::warn("lock {} lost: {}", Quoted(name), reason);
  observer_->LockLost(reason);
  ReleaseEverywhere(KeyOf(name), LeaseOf(*h));
  on_lost_(h->session, name, h->token.str(), reason);
  Pump(name);
}

void LockEngine::Revoke(const std::string& name,
                        std::function<void(const std::optional<Revocation>&)> done) {
  Resource* r = Find(name);
  if (r == nullptr || !r->holder) {
    Defer([done = std::move(done)] { done(std::nullopt); });
    return;
  }
  auto h = TakeHolder(*r, name);
  spdlog::warn("lock {} revoked by an operator (session {})", Quoted(name), h->session);
  observer_->LockLost("revoked");
  rounds_.Run(DeleteRound(KeyOf(name), LeaseOf(*h)),
              [this, session = h->session, done = std::move(done)](const RoundResult& res) {
                done(Revocation{session, res.tally.yes()});
                MaybeFinishShutdown();
              });
  on_lost_(h->session, name, h->token.str(), "revoked");
  Pump(name);
}

std::unique_ptr<LockEngine::Holder> LockEngine::TakeHolder(Resource& r, const std::string& name) {
  auto h = std::move(r.holder);
  --holders_;
  timed_.erase(h->serial);
  observer_->HoldEnded(Clock::now() - h->acquired);
  auto it = sessions_.find(h->session);
  if (it != sessions_.end()) {
    auto& held = it->second.held;
    auto pos = std::find(held.begin(), held.end(), name);
    if (pos != held.end()) {
      *pos = std::move(held.back());
      held.pop_back();
    }
  }
  return h;
}

void LockEngine::ReleaseEverywhere(const std::string& key, const std::string& token) {
  rounds_.Run(DeleteRound(key, token), [this](const RoundResult&) { MaybeFinishShutdown(); });
}

// ---- sessions, shutdown, views --------------------------------------------------------------

void LockEngine::ForgetWaiter(SessionId session, const std::string& name) {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  auto w = it->second.waiting.find(name);
  if (w != it->second.waiting.end() && --w->second <= 0) it->second.waiting.erase(w);
}

void LockEngine::CloseSession(SessionId session) {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  SessionIndex index = std::move(it->second);
  sessions_.erase(it);
  std::vector<std::string> touched;
  for (const auto& name : index.held) {
    Resource* r = Find(name);
    if (r == nullptr || !r->holder || r->holder->session != session) continue;
    auto h = TakeHolder(*r, name);
    ReleaseEverywhere(KeyOf(name), LeaseOf(*h));
    touched.push_back(name);
  }
  for (const auto& [name, count] : index.waiting) {
    Resource* r = Find(name);
    if (r == nullptr) continue;
    for (auto w = r->waiters.begin(); w != r->waiters.end();) {
      if (w->session != session) {
        ++w;
      } else if (w == r->waiters.begin() && w->in_attempt) {
        (w++)->cancelled = true;  // the attempt in flight undoes itself
      } else {
        if (w == r->waiters.begin() && r->retry_timer) r->retry_timer->Stop();
        timed_.erase(w->id);
        w = r->waiters.erase(w);
      }
    }
    touched.push_back(name);
  }
  for (const auto& name : touched) Pump(name);
}

void LockEngine::MaybeErase(const std::string& name) {
  Resource* r = Find(name);
  if (r == nullptr || r->holder || !r->waiters.empty() || r->attempt_in_flight) return;
  if (r->retry_timer && r->retry_timer->active()) return;
  if (r->watched && options_.release_watch != nullptr) options_.release_watch->Unwatch(KeyOf(name));
  resources_.erase(name);
}

void LockEngine::Shutdown(std::function<void()> done) {
  shutting_down_ = true;
  shutdown_done_ = std::move(done);
  // Every lock goes below: dropping the per-session lists first keeps TakeHolder from
  // searching them lock by lock.
  for (auto& [id, index] : sessions_) index.held.clear();
  std::vector<AcquireDone> refused;
  for (auto& [name, r] : resources_) {
    for (auto w = r->waiters.begin(); w != r->waiters.end();) {
      if (!w->cancelled) ReportAcquire(*w, name, ErrorCode::kShuttingDown, /*granted=*/false);
      refused.push_back(std::move(w->done));
      if (w == r->waiters.begin() && w->in_attempt) {
        (w++)->cancelled = true;
      } else {
        timed_.erase(w->id);
        w = r->waiters.erase(w);
      }
    }
    if (r->retry_timer) r->retry_timer->Stop();
    if (r->holder) {
      auto h = TakeHolder(*r, name);
      ReleaseEverywhere(KeyOf(name), LeaseOf(*h));
    }
  }
  // No waiter or holder is left: their deadlines must not keep the loop alive.
  timed_.clear();
  deadlines_.Clear();
  renew_backlog_.clear();
  for (auto& d : refused) {
    d(Failure{ErrorCode::kShuttingDown, "the agent is shutting down"});
  }
  Defer([this] { MaybeFinishShutdown(); });
}

void LockEngine::MaybeFinishShutdown() {
  if (!shutting_down_ || !shutdown_done_ || rounds_.in_flight() != 0) return;
  // Every waiter and holder is gone: their superseded deadlines must not keep the loop alive.
  deadlines_.Clear();
  auto done = std::move(shutdown_done_);
  shutdown_done_ = nullptr;
  done();
}

std::vector<HeldLock> LockEngine::HeldBy(SessionId session) const {
  std::vector<HeldLock> out;
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return out;
  const auto now = Clock::now();
  for (const auto& name : it->second.held) {
    const auto& r = resources_.at(name);
    const Holder& h = *r->holder;
    out.push_back({name, h.token.str(), std::max<int64_t>(0, CeilMs(h.valid_until - now)), h.renew});
  }
  std::sort(out.begin(), out.end(),
            [](const HeldLock& a, const HeldLock& b) { return a.resource < b.resource; });
  return out;
}

std::vector<LockView> LockEngine::AllLocks() const {
  std::vector<LockView> out;
  const auto now = Clock::now();
  for (const auto& [name, r] : resources_) {
    if (!r->holder) continue;
    const Holder& h = *r->holder;
    out.push_back({name, h.session, CeilMs(now - h.acquired),
                   std::max<int64_t>(0, CeilMs(h.valid_until - now)), h.renew,
                   static_cast<int>(r->waiters.size()), h.ttl_ms, KeyOf(name), h.fence, Peer{}});
  }
  std::sort(out.begin(), out.end(),
            [](const LockView& a, const LockView& b) {
              return a.held_ms != b.held_ms ? a.held_ms > b.held_ms : a.resource < b.resource;
            });
  return out;
}

std::vector<std::pair<std::string, std::string>> LockEngine::HeldGrants() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, r] : resources_) {
    if (r->holder) out.emplace_back(KeyOf(name), LeaseOf(*r->holder));
  }
  return out;
}

size_t LockEngine::Commitments(SessionId session) const {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return 0;
  size_t n = it->second.held.size();
  for (const auto& [name, count] : it->second.waiting) n += static_cast<size_t>(count);
  return n;
}

size_t LockEngine::waiters() const {
  size_t n = 0;
  for (const auto& [name, r] : resources_) n += r->waiters.size();
  return n;
}

std::vector<NodeStatus> LockEngine::NodeStatuses() const {
  std::vector<NodeStatus> out;
  for (const Node* n : rounds_.nodes()) out.push_back(n->status());
  return out;
}

}  // namespace lw
