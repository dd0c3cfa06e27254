#include "locking/failure_text.h"

#include "core/quote.h"

namespace lw {
namespace {

std::string N(int64_t n) { return std::to_string(n); }

// No master held back the key, yet too few voted: which ones, and why.
std::string TooFewMasters(const AttemptHistory& h, const VoteTally& t, int masters) {
  const std::string n = N(masters);
  std::string message = h.last_in_fence_phase
                            ? "only " + N(t.yes()) + " of " + n +
                                  " masters still held the key when its fence was written"
                            : "only " + N(t.answered()) + " of " + n + " masters answered in time";
  message += " (quorum is " + N(t.quorum());
  if (h.fence) message += "; a fenced grant needs " + N(t.needed()) + " of " + n;
  message += ")";
  if (t.failed() > 0 && !h.last_in_fence_phase) {
    // Otherwise "0 of 5 answered" reads like a timeout when 3 masters were simply down: the
    // round ends as soon as quorum is out of reach, before the live ones answer.
    message += "; " + N(t.failed()) + " could not be asked or failed (down, unreachable or an "
               "error reply)";
    if (t.outstanding() > 0) message += ", which ended the round before the others answered";
  }
  if (t.not_counting() > 0) {
    message += "; " + N(t.not_counting()) + " master(s) are in restart quarantine and do not "
               "count toward quorum until max_ttl_ms after their start";
  }
  return message + "; see `lockwarden status` for master health";
}

}  // namespace

std::string Quoted(std::string_view name) { return QuoteClientText(name); }

Failure AcquireFailure(std::string_view resource, const AttemptHistory& h, int masters) {
  if (h.attempts == 0 || !h.last_tally) return QueuedTooLong(resource, h.wait_ms);
  if (h.last_too_slow) {
    return {ErrorCode::kNoQuorum,
            "a quorum of masters said yes, but too slowly: no validity was left of ttl_ms=" +
                N(h.ttl_ms) + "; raise ttl_ms or check master latency"};
  }
  const VoteTally& t = *h.last_tally;
  // Enough masters answered that, had the key been free, the attempt would have been won; or
  // the refusals alone left too few masters to win (a fenced attempt needs more yes votes than
  // a quorum, so its round ends at the first refusals, before every master answered).
  const int counting_no = t.counting_answered() - t.counting_yes();
  const bool refused = t.no() > 0 && (masters - t.no() < t.needed() ||
                                      masters - t.not_counting() - counting_no < t.quorum());
  if (refused || (t.answered() >= t.needed() && t.counting_answered() >= t.quorum())) {
    return {ErrorCode::kTimeout,
            Quoted(resource) + " stayed held by another owner for all of wait_ms=" +
                N(h.wait_ms) + " (" + N(h.attempts) + " attempt(s)" +
                (h.last_refusal.empty() ? "" : "; last: " + h.last_refusal) + ")"};
  }
  if (masters - t.not_counting() < t.quorum()) {
    return {ErrorCode::kNoQuorum,
            N(t.not_counting()) + " of " + N(masters) + " masters are in restart quarantine "
            "(they started less than max_ttl_ms ago and may have forgotten locks), so only " +
                N(masters - t.not_counting()) + " can count toward quorum (" + N(t.quorum()) +
                "); see `lockwarden status` for when each counts again"};
  }
  return {ErrorCode::kNoQuorum, TooFewMasters(h, t, masters)};
}

Failure KindMismatch(std::string_view resource, std::string_view asked, std::string_view found) {
  return {ErrorCode::kKindMismatch,
          Quoted(resource) + " is in use as " + std::string(found) + "; this acquire asked for " +
              std::string(asked) + ". Every holder of one resource must name the same kind (and "
              "a semaphore the same permits)"};
}

Failure WouldDeadlock(std::string_view resource, std::string_view mode, int64_t held_ms,
                      std::string_view token) {
  return {ErrorCode::kWouldDeadlock,
          Quoted(resource) + " is held by this session already (its " + std::string(mode) +
              " hold of " + N(held_ms) + " ms, token " + std::string(token.substr(0, 8)) +
              "...): this acquire would wait for that hold, which only this session can "
              "release. Locks are not reentrant: release it first, or keep using it"};
}

Failure QueuedTooLong(std::string_view resource, int64_t wait_ms) {
  return {ErrorCode::kTimeout, Quoted(resource) + " was held by another session of this agent "
                               "for all of wait_ms=" + N(wait_ms)};
}

Failure TooManyQueued(size_t queued) {
  return {ErrorCode::kTooMany, std::to_string(queued) + " acquires of this resource are already "
                               "queued on this agent (max_waiters_per_resource); retry later"};
}

Failure ShuttingDown(bool retry_hint) {
  return {ErrorCode::kShuttingDown,
          retry_hint ? "the agent is shutting down; retry shortly" : "the agent is shutting down"};
}

Failure ReleaseNotHeld(std::string_view resource) {
  return {ErrorCode::kNotHeld, "this connection does not hold " + Quoted(resource) +
                               " with that token (released, expired, or never acquired here)"};
}

Failure ExtendNotHeld(std::string_view resource) {
  return {ErrorCode::kNotHeld,
          "this connection does not hold " + Quoted(resource) + " with that token"};
}

Failure ReleasedWhileExtending(std::string_view resource) {
  return {ErrorCode::kNotHeld, Quoted(resource) + " was released while extending"};
}

Failure ExtendFailure(std::string_view resource, const VoteTally& t, int masters, bool lost,
                      int64_t valid_left_ms) {
  const std::string confirmed = N(t.counting_yes()) + " of " + N(masters) + " masters confirmed";
  const std::string quarantined =
      t.not_counting() > 0
          ? "; " + N(t.not_counting()) + " master(s) are in restart quarantine and do not count"
          : "";
  if (lost) {
    return {ErrorCode::kNotHeld, Quoted(resource) + " could not be extended before its validity "
                                 "ran out (" + confirmed + quarantined + "); the lock is lost"};
  }
  return {ErrorCode::kNoQuorum, "only " + confirmed + " the extension" + quarantined +
                                    " (quorum is " + N(t.quorum()) +
                                    "); the lock stays valid for " + N(valid_left_ms) + " ms"};
}

Failure ValidityRanOutBeforeReply() {
  return {ErrorCode::kNoQuorum, "the lock was won but its validity ran out before the reply "
                                "could be written; it was released"};
}

}  // namespace lw
