// LockEngine::Resume: a hold of an earlier run of this agent taken over by a session that
// proves it by its token (docs/safety.md "Resume"); a leadership's record is read first.

#include <spdlog/spdlog.h>

#include "core/election_record.h"
#include "core/redlock_math.h"
#include "locking/failure_text.h"
#include "locking/kinds/kinds.h"
#include "locking/lock_engine.h"

namespace lw {
namespace {

Failure ResumeRefused(std::string_view resource, std::string why) {
  return {ErrorCode::kBadRequest, "cannot resume " + Quoted(resource) + ": " + why};
}

// lost: a quorum of counting masters said the key does not hold the token (or it was released
// meanwhile); otherwise too few answered to decide.
Failure ResumeFailure(std::string_view resource, bool lost) {
  if (lost) {
    return {ErrorCode::kNotHeld,
            "cannot resume " + Quoted(resource) + ": a quorum of masters does not hold it with "
            "that token (it expired, was released or revoked, or was granted through another "
            "agent); the lock is lost: acquire it again"};
  }
  return {ErrorCode::kNoQuorum,
          "cannot resume " + Quoted(resource) + ": too few masters confirmed it in time, so "
          "whether it is still held is not known; retry the resume within its validity"};
}

// The record a leader of `term` stored beside its hold `value`, as the masters' reads (kReadRecord,
// by master; each strips the value P R holds there) have it; "" when none has that term: the
// hold is then resumed without it (its views show no record, and its release leaves the record
// to expire, unread: a record is read only beside the value it names).
std::string RecordOfTerm(const std::vector<std::optional<std::string>>& reads, int64_t term,
                         const std::string& value) {
  for (const auto& text : reads) {
    if (!text) continue;
    const auto record = ParseReadRecord(*text);
    if (record && record->term == term) return StoredRecord(value, *record);
  }
  return "";
}

}  // namespace

void LockEngine::Resume(SessionId session, ResumeAsk ask, AcquireDone done) {
  const std::string name = ask.resource;
  auto refuse = [&](Failure f) {
    stats_->resumes[ResumeOutcome::kFailed].Inc();
    Defer([done = std::move(done), f = std::move(f)] { done(f); });
  };
  if (shutting_down_) return refuse(ShuttingDown(/*retry_hint=*/true));
  const Resource* existing = Find(name);
  if (ask.confirm_first && existing == nullptr) {
    return ConfirmThenResume(session, std::move(ask), std::move(done));
  }
  if (existing != nullptr && !(existing->shape == ask.kind.shape)) {
    return refuse(KindMismatch(name, ask.kind.shape.WithArticle(),
                               existing->shape.WithArticle() + " through this agent"));
  }
  if (ask.kind.shape.kind == LockKind::kElection) {
    if (!ask.fence || *ask.fence <= 0) {
      return refuse(ResumeRefused(name, "a leadership's resume names its term (\"fence\")"));
    }
    if (!ask.record) return ReadRecordThenResume(session, std::move(ask), std::move(done));
  }
  const HoldMode mode = KindOf(ask.kind.shape).ModeAsked(ask.kind.shared);
  if (mode == HoldMode::kPermit &&
      (ask.permit < 0 || ask.permit >= ask.kind.shape.permits)) {
    return refuse(ResumeRefused(name, "a permit's resume names its permit (0.." +
                                          std::to_string(ask.kind.shape.permits - 1) + ")"));
  }
  if (existing != nullptr) {
    for (const auto& h : existing->holders) {
      if (h->token == ask.token) {
        return refuse(ResumeRefused(
            name, h->session == session ? "this connection holds it already"
                                        : "session " + std::to_string(h->session) +
                                              " of this agent holds it; it ends with that "
                                              "session or its release"));
      }
      if (mode != HoldMode::kShared && h->mode == mode && h->part == ask.permit) {
        return refuse(ResumeRefused(name, "another hold of this agent occupies that part"));
      }
    }
  }
  Resource& r = table_.Add(name, ask.kind.shape);
  auto held = std::make_unique<Holder>();
  held->serial = next_waiter_id_++;
  held->session = session;
  held->token = FixedToken(ask.token);
  held->ttl_ms = ask.ttl_ms;
  held->renew = ask.renew;
  held->fence = ask.fence;
  held->mode = mode;
  held->part = static_cast<int16_t>(mode == HoldMode::kPermit ? ask.permit : -1);
  held->acquired = Clock::now();
  held->kept = IsLeaseSession(session);  // a detached lease outlives the agent's run
  held->owner = ask.kind.owner;
  held->depth = static_cast<uint16_t>(ask.depth);
  if (ask.record && !ask.record->empty()) held->note = std::make_unique<std::string>(*ask.record);
  // Held here from now on (a local waiter does not contend beside it), but not yet confirmed:
  // the extend round below decides, and its validity replaces this bound.
  held->valid_until = held->acquired + std::chrono::milliseconds(ask.ttl_ms);
  stats_->holds[mode].Inc();
  table_.Install(r, name, std::move(held));
  RunExtend(name, ask.token, ask.ttl_ms,
            [this, name, token = ask.token, done = std::move(done)](
                const std::variant<Extension, Failure>& result) {
              Holder* h = FindHolder(name, token);
              if (const auto* e = std::get_if<Extension>(&result); e != nullptr && h) {
                stats_->resumes[ResumeOutcome::kResumed].Inc();
                spdlog::info("lock {} resumed by session {} ({} ms left)", Quoted(name),
                             h->session, e->validity_ms);
                done(Grant{token, e->validity_ms, 0, h->fence, h->part, h->mode, h->serial,
                           h->depth > 1 ? h->depth : 0});
                return;
              }
              const auto* f = std::get_if<Failure>(&result);
              const bool lost = f == nullptr || f->code == ErrorCode::kNotHeld;
              stats_->resumes[lost ? ResumeOutcome::kNotHeld : ResumeOutcome::kFailed].Inc();
              if (h != nullptr) {
                Resource& res = *Find(name);
                auto gone = TakeHolder(res, name, h);
                // Where a master still holds the value it is this token's: deleting it there
                // can only end this grant. Not decided (no_quorum): left for another try.
                if (lost) ReleaseEverywhere(name, res, *gone);
                Pump(name);
                MaybeErase(name);
              }
              done(ResumeFailure(name, lost));
            },
            /*timeout_ms=*/0);
}

void LockEngine::ReadRecordThenResume(SessionId session, ResumeAsk ask, AcquireDone done) {
  RoundRequest read = ReadRecordRound(table_.key_prefix(), ask.resource);  // before ask moves
  rounds_.Run(std::move(read), [this, session, ask = std::move(ask),
                                done = std::move(done)](const RoundResult& res) mutable {
    MaybeFinishShutdown();
    ask.record = RecordOfTerm(res.values, *ask.fence, options_.value_prefix + ask.token);
    Resume(session, std::move(ask), std::move(done));
  });
}

void LockEngine::ConfirmThenResume(SessionId session, ResumeAsk ask, AcquireDone done) {
  const HoldMode mode = KindOf(ask.kind.shape).ModeAsked(ask.kind.shared);
  const HoldPlace place{table_.key_prefix(), options_.fence_prefix, ask.resource, ask.kind.shape,
                        mode, mode == HoldMode::kPermit ? ask.permit : -1};
  RoundRequest req = kinds::TakeLease(place, ask.token, ask.ttl_ms);
  rounds_.Run(std::move(req), [this, session, ask = std::move(ask),
                               done = std::move(done)](const RoundResult& res) mutable {
    const VoteTally& t = res.tally;
    const int64_t validity = ValidityMs(ask.ttl_ms, CeilMs(Clock::now() - res.started),
                                        options_.drift_factor);
    if (t.Won() && validity > 0 && !shutting_down_) {
      ask.confirm_first = false;
      Resume(session, std::move(ask), std::move(done));
      return;
    }
    MaybeFinishShutdown();
    const bool lost = t.counting_answered() - t.counting_yes() >= t.quorum();
    stats_->resumes[lost ? ResumeOutcome::kNotHeld : ResumeOutcome::kFailed].Inc();
    done(shutting_down_ ? ShuttingDown(/*retry_hint=*/true) : ResumeFailure(ask.resource, lost));
  });
}

}  // namespace lw
