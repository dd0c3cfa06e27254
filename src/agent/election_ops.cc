// The election ops of LockService's op table (docs/protocol.md "Elections"). A campaign is an
// acquire of the name as an election (kind kElection, always fenced: the term is the fence,
// renewed while the connection lives); resign is its release; leader, observe and unobserve go
// to Elections.

#include "agent/elections.h"
#include "agent/lock_service.h"
#include "core/quote.h"

namespace lw {

namespace {
Failure NoElections() {
  return Failure{ErrorCode::kInternal, "this agent serves no elections (no Elections part)"};
}

std::optional<protocol::LeaderView> ViewOf(const LeaderReading& reading) {
  if (reading.state != LeaderReading::State::kLeader) return std::nullopt;
  return protocol::LeaderViewOf(reading.record);
}
}  // namespace

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::CampaignRequest& op) {
  if (options_.elections == nullptr) return Fail(sid, id, "campaign", NoElections());
  AcquireKind kind{.shape = LockShape{LockKind::kElection},
                   .shared = false,
                   .hold_as = 0,
                   .payload = options_.elections->CandidatePayload(op.value, PeerOf(sid).pid)};
  engine_.Acquire(
      sid, op.name, op.ttl_ms, op.wait_ms, /*renew=*/true,
      [this, sid, id, name = op.name](const std::variant<Grant, Failure>& result) {
        Asked(sid, id);
        if (const auto* g = std::get_if<Grant>(&result)) {
          if (!g->fence) {  // an election's grant always carries its term
            Fail(sid, id, "campaign",
                 Failure{ErrorCode::kInternal, "the election was granted without a term"});
            return;
          }
          Answer(sid, protocol::EncodeElected(id, name, *g->fence, g->token, g->validity_ms,
                                              g->waited_ms));
          return;
        }
        const Failure& f = std::get<Failure>(result);
        if (f.code == ErrorCode::kTooMany) {
          stats_.limit_refusals[Limit::kWaitersPerResource].Inc();
        }
        Fail(sid, id, "campaign", f);
      },
      /*fence=*/true, std::move(kind));
}

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::ResignRequest& op) {
  // resign ends a leadership, never a lock's hold that happens to have the name and token.
  for (const HeldLock& held : engine_.books().HeldBy(sid)) {
    if (held.resource == op.name && held.token == op.token &&
        held.kind != LockKind::kElection) {
      return Fail(sid, id, "resign",
                  Failure{ErrorCode::kKindMismatch,
                          "this token holds " + LockShape{held.kind, held.permits}.WithArticle() +
                              " named " + QuoteClientText(op.name) +
                              ", not a leadership: end it with release"});
    }
  }
  engine_.Release(sid, op.name, op.token, [this, sid, id](const std::optional<Failure>& f) {
    if (f) {
      Fail(sid, id, "resign", *f);
    } else {
      Answer(sid, protocol::EncodeOk(id));
    }
  });
}

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::LeaderRequest& op) {
  if (options_.elections == nullptr) return Fail(sid, id, "leader", NoElections());
  options_.elections->Read(op.name, [this, sid, id, name = op.name](const LeaderReading& r) {
    if (r.state == LeaderReading::State::kUnknown) {
      Fail(sid, id, "leader", options_.elections->Undecided(r));
    } else {
      Answer(sid, protocol::EncodeLeader(id, name, ViewOf(r)));
    }
  });
}

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::ObserveRequest& op) {
  if (options_.elections == nullptr) return Fail(sid, id, "observe", NoElections());
  auto refused = options_.elections->Observe(
      sid, op.name,
      [this, sid, id, name = op.name](const std::variant<LeaderReading, Failure>& result) {
        if (const auto* f = std::get_if<Failure>(&result)) {
          Fail(sid, id, "observe", *f);
        } else {
          Answer(sid, protocol::EncodeLeader(id, name, ViewOf(std::get<LeaderReading>(result))));
        }
      });
  if (refused) {
    if (refused->code == ErrorCode::kTooMany) stats_.limit_refusals[Limit::kObservations].Inc();
    Fail(sid, id, "observe", *refused);
  }
}

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::UnobserveRequest& op) {
  if (options_.elections == nullptr) return Fail(sid, id, "unobserve", NoElections());
  if (!options_.elections->Unobserve(sid, op.name)) {
    return Fail(sid, id, "unobserve",
                Failure{ErrorCode::kNotHeld, "this connection does not observe that election"});
  }
  Answer(sid, protocol::EncodeOk(id));
}

}  // namespace lw
