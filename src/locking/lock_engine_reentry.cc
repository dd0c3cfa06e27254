// LockEngine: a session's acquire of what it holds itself. Locks are not reentrant by default:
// an acquire that could only wait for holds of its own session and owner (a thread, a task)
// would wait for itself until wait_ms ran out, so it is refused at once (would_deadlock). Asked
// with `reentrant`, an exclusive hold of the same session and owner is taken again: its depth
// counts the acquires, and as many releases let go of it (docs/protocol.md "Reentrancy").

#include "locking/failure_text.h"
#include "locking/kinds/kinds.h"
#include "locking/lock_engine.h"

namespace lw {

std::optional<Failure> LockEngine::OwnHoldInTheWay(const Resource& r, const std::string& name,
                                                   SessionId session, uint64_t owner,
                                                   HoldMode mode) const {
  Holders own;  // the owner's holds as the kind's rule sees them: their mode and part
  const Holder* first = nullptr;
  for (const auto& h : r.holders) {
    if (h->session != session || h->owner != owner) continue;
    if (first == nullptr) first = h.get();
    auto copy = std::make_unique<Holder>();
    copy->mode = h->mode;
    copy->part = h->part;
    own.push_back(std::move(copy));
  }
  if (own.empty() || r.kind().MayContendBeside(r.shape, mode, own)) return std::nullopt;
  return WouldDeadlock(name, NameOf(first->mode), CeilMs(Clock::now() - first->acquired),
                       first->token.str());
}

Holder* LockEngine::OwnExclusiveHold(const Resource& r, SessionId session, uint64_t owner) {
  for (const auto& h : r.holders) {
    if (h->session == session && h->owner == owner && h->mode == HoldMode::kExclusive) {
      return h.get();
    }
  }
  return nullptr;
}

void LockEngine::Reenter(const std::string& name, Holder& h, AcquireDone done) {
  const auto now = Clock::now();
  const int64_t validity_ms = MsLeft(h.valid_until, now);
  if (validity_ms <= 0) return Refuse(ValidityRanOutBeforeReply(), std::move(done));
  if (h.depth == UINT16_MAX) {
    return Refuse(Failure{ErrorCode::kTooMany, Quoted(name) + " is held reentrantly " +
                                                   std::to_string(UINT16_MAX) +
                                                   " times already by this owner"},
                  std::move(done));
  }
  ++h.depth;
  table_.Touched(name, h);
  stats_->AcquireAnswered(AcquireOutcome::kAcquired, {}, 0);
  events_->AcquireFinished(AcquireOutcome::kAcquired, {}, 0);
  // Answered now, as a grant is (LockEngine::AnswerGrant): a deferred reply could follow a
  // revoke that took the hold in between.
  done(Grant{h.token.str(), validity_ms, 0, h.fence, h.part, h.mode, h.serial, h.depth});
}

bool LockEngine::AnyReentered() const {
  bool any = false;
  const_cast<ResourceTable&>(table_).ForEach([&any](const std::string&, Resource& r) {
    for (const auto& h : r.holders) any = any || h->depth > 1;
  });
  return any;
}

std::optional<int> LockEngine::Unwind(SessionId session, const std::string& name,
                                      const std::string& token) {
  Holder* h = FindHolder(name, token);
  if (h == nullptr || h->session != session || h->depth <= 1) return std::nullopt;
  --h->depth;
  table_.Touched(name, *h);
  return h->depth;
}

}  // namespace lw
