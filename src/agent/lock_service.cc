#include "agent/lock_service.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cassert>
#include <utility>
#include <variant>

#include "agent/elections.h"
#include "protocol/fast_decode.h"

namespace lw {
namespace {

// The locks a request takes, for the access rules and max_locks_per_session: an acquire's
// resource (or resources), a resume's, a campaign's election.
std::vector<const std::string*> LocksTaken(const protocol::Op& op) {
  if (const auto* acquire = std::get_if<protocol::AcquireRequest>(&op)) {
    if (acquire->resources.empty()) return {&acquire->resource};
    std::vector<const std::string*> out;
    for (const auto& r : acquire->resources) out.push_back(&r);
    return out;
  }
  if (const auto* resume = std::get_if<protocol::ResumeRequest>(&op)) return {&resume->resource};
  if (const auto* campaign = std::get_if<protocol::CampaignRequest>(&op)) return {&campaign->name};
  return {};
}

}  // namespace

LockService::LockService(SessionWriter& transport, SessionTable& sessions, LockEngine& engine,
                         ServiceOptions options, RequestStats& stats)
    : transport_(transport),
      sessions_(sessions),
      engine_(engine),
      options_(std::move(options)),
      stats_(stats) {
  assert(&engine_.books().sessions() == &sessions_ && "the engine keeps books elsewhere");
}

void LockService::Opened(SessionId session, const Peer& peer, const std::vector<gid_t>& groups) {
  ClientSession& s = sessions_.Open(session);
  s.peer = peer;
  s.ids = PeerIds{static_cast<uid_t>(peer.uid), static_cast<gid_t>(peer.gid), groups};
}

void LockService::Closed(SessionId session) {
  const ClientSession* s = sessions_.Find(session);
  if (s == nullptr) return;
  Undetaching(s->ids.uid, s->detaching);
  if (options_.elections != nullptr) options_.elections->CloseSession(session);
  multis_.erase(session);  // their grants end with the session's locks
  engine_.CloseSession(session);
  sessions_.Erase(session);
}

bool LockService::Idle(SessionId session) const {
  const ClientSession* s = sessions_.Find(session);
  return s == nullptr || s->idle();
}

bool LockService::Answered(SessionId session) const {
  const ClientSession* s = sessions_.Find(session);
  return s == nullptr || s->inflight == 0;
}

// The op table's handlers: one per request type.

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::AcquireRequest& op) {
  if (!op.resources.empty()) return AcquireAll(sid, id, op);
  ClientSession& s = *sessions_.Find(sid);  // Line found it
  if (op.detach) {
    ++s.detaching;
    ++LeaseSession(s.ids.uid).detaching;
  }
  engine_.Acquire(
      sid, op.resource, op.ttl_ms, op.wait_ms, op.renew,
      [this, sid, id, resource = op.resource,
       detach = op.detach](const std::variant<Grant, Failure>& result) {
        Asked(sid, id);
        if (detach) LeaseAnswered(sid, resource, result);
        if (const auto* g = std::get_if<Grant>(&result)) {
          Answer(sid, protocol::EncodeAcquired(id, resource, g->token, g->validity_ms,
                                               g->waited_ms, g->fence, g->mode, g->permit,
                                               g->depth));
          return;
        }
        const Failure& f = std::get<Failure>(result);
        if (f.code == ErrorCode::kTooMany) {
          stats_.limit_refusals[Limit::kWaitersPerResource].Inc();
        }
        Fail(sid, id, "acquire", f);
      },
      op.fence,
      AcquireKind{.shape = op.permits > 0 ? LockShape{LockKind::kSemaphore, op.permits}
                                          : LockShape{},
                  .shared = op.shared,
                  .hold_as = op.detach ? LeaseSessionOf(s.ids.uid) : 0,
                  .payload = {},
                  .owner = op.owner,
                  .reentrant = op.reentrant});
}

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::ResumeRequest& op) {
  LockEngine::ResumeAsk ask{
      .resource = op.resource,
      .token = op.token,
      .ttl_ms = op.ttl_ms,
      .renew = op.renew,
      .fence = op.fence > 0 ? std::optional<int64_t>(op.fence) : std::nullopt,
      .kind = AcquireKind{.shape = op.election       ? LockShape{LockKind::kElection}
                                   : op.permits > 0 ? LockShape{LockKind::kSemaphore, op.permits}
                                                    : LockShape{},
                          .shared = op.shared,
                          .hold_as = 0,
                          .payload = {},
                          .owner = op.owner,
                          .reentrant = false},
      .depth = op.depth,
      .permit = op.permit,
      .confirm_first = false,
      .record = std::nullopt};
  engine_.Resume(sid, std::move(ask),
                 [this, sid, id, resource = op.resource](const std::variant<Grant, Failure>& result) {
                   if (const auto* g = std::get_if<Grant>(&result)) {
                     Answer(sid, protocol::EncodeAcquired(id, resource, g->token, g->validity_ms,
                                                          g->waited_ms, g->fence, g->mode,
                                                          g->permit, g->depth));
                     return;
                   }
                   Fail(sid, id, "resume", std::get<Failure>(result));
                 });
}

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::ReleaseRequest& op) {
  auto owner = OwnerFor(sid, op.resource, op.token, "release");
  if (const auto* refusal = std::get_if<Failure>(&owner)) {
    Fail(sid, id, "release", *refusal);
    return;
  }
  const SessionId holder = std::get<SessionId>(owner);
  if (holder == sid && !HoldsItself(sid, op.resource, op.token)) {
    const SessionId lease = LeaseSessionOf(sessions_.Find(sid)->ids.uid);
    AdoptLease(sid, op.resource, op.token, options_.limits.min_ttl_ms, "release",
               [this, sid, id, lease, resource = op.resource,
                token = op.token](const std::variant<Grant, Failure>& adopted) {
                 if (const auto* f = std::get_if<Failure>(&adopted)) {
                   Fail(sid, id, "release", *f);
                 } else {
                   ReleaseFor(sid, id, lease, resource, token);
                 }
               });
    return;
  }
  ReleaseFor(sid, id, holder, op.resource, op.token);
}

void LockService::ReleaseFor(SessionId sid, const Id& id, SessionId holder,
                             const std::string& resource, const std::string& token) {
  // A reentrant hold taken more than once: one release less, nothing else changes.
  if (auto left = engine_.Unwind(holder, resource, token)) {
    Answer(sid, protocol::EncodeUnwound(id, *left));
    return;
  }
  // The engine lets go of a hold at once (its masters' answers are not awaited for that).
  if (holder != sid) leases_.Drop(resource, token);
  stats_.detached_leases.Set(static_cast<double>(leases_.size()));
  engine_.Release(holder, resource, token, [this, sid, id](const std::optional<Failure>& f) {
    if (f) {
      Fail(sid, id, "release", *f);
    } else {
      Answer(sid, protocol::EncodeOk(id));
    }
  });
}

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::ExtendRequest& op) {
  auto owner = OwnerFor(sid, op.resource, op.token, "extend");
  if (const auto* refusal = std::get_if<Failure>(&owner)) {
    Fail(sid, id, "extend", *refusal);
    return;
  }
  const SessionId holder = std::get<SessionId>(owner);
  if (holder == sid && !HoldsItself(sid, op.resource, op.token)) {
    // Adopting a lease of the earlier run confirms it by this extend's ttl: that is the extend.
    AdoptLease(sid, op.resource, op.token, op.ttl_ms, "extend",
               [this, sid, id](const std::variant<Grant, Failure>& adopted) {
                 if (const auto* f = std::get_if<Failure>(&adopted)) {
                   Fail(sid, id, "extend", *f);
                 } else {
                   Answer(sid, protocol::EncodeExtended(id, std::get<Grant>(adopted).validity_ms));
                 }
               });
    return;
  }
  engine_.Extend(holder, op.resource, op.token, op.ttl_ms,
                 [this, sid, id, holder, resource = op.resource,
                  token = op.token](const std::variant<Extension, Failure>& result) {
                   if (const auto* e = std::get_if<Extension>(&result)) {
                     Answer(sid, protocol::EncodeExtended(id, e->validity_ms));
                     return;
                   }
                   const Failure& f = std::get<Failure>(result);
                   // not_held: the engine no longer holds it (nor will).
                   if (holder != sid && f.code == ErrorCode::kNotHeld) {
                     leases_.Drop(resource, token);
                     stats_.detached_leases.Set(static_cast<double>(leases_.size()));
                   }
                   Fail(sid, id, "extend", f);
                 });
}

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::UpgradeRequest&) {
  const ClientSession& s = *sessions_.Find(sid);  // Line found it
  if (s.ids.uid != 0 && s.ids.uid != geteuid()) {
    return Fail(sid, id, "upgrade",
                Failure{ErrorCode::kForbidden, "only root and the agent's own user (uid " +
                                                   std::to_string(geteuid()) +
                                                   ") may upgrade it"});
  }
  if (!options_.upgrade) {
    return Fail(sid, id, "upgrade",
                Failure{ErrorCode::kUnavailable, "this agent cannot be upgraded in place"});
  }
  options_.upgrade(sid, id);
}

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::HeldRequest&) {
  Answer(sid, protocol::EncodeHeld(id, engine_.books().HeldBy(sid)));
}

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::HealthRequest&) {
  std::vector<protocol::NodeHealthView> nodes;
  for (const auto& n : engine_.NodeStatuses()) {
    nodes.push_back({n.addr, n.tls, n.up ? "" : n.last_error, n.up, n.rtt_ms, n.quarantined,
                     n.quarantine_left_ms.value_or(0), n.quarantine_reason});
  }
  std::optional<std::string> admin_url;
  if (options_.admin_url) admin_url = options_.admin_url();
  Answer(sid, protocol::EncodeHealth(id, engine_.quorum(), nodes, admin_url));
}

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::PingRequest&) {
  Answer(sid, protocol::EncodeOk(id));
}

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::LocksRequest&) {
  Answer(sid, protocol::EncodeLocks(id, Locks()));
}

void LockService::Line(SessionId sid, std::string_view line) {
  ClientSession* found = sessions_.Find(sid);
  if (found == nullptr) return;
  ClientSession& s = *found;
  // The hot ops' decoder first: it declines whatever it is not certain of, and the strict
  // decoder then gives every error and every other request.
  auto hot = protocol::DecodeHotRequest(line, options_.limits);
  auto decoded = hot ? std::variant<protocol::Request, protocol::DecodeError>(std::move(*hot))
                     : protocol::DecodeRequest(line, options_.limits);
  if (auto* err = std::get_if<protocol::DecodeError>(&decoded)) {
    const std::string_view op = err->op.empty() ? std::string_view("request") : err->op;
    stats_.Received(op);
    stats_.Failed(op, err->code);
    transport_.Send(sid, protocol::EncodeError(err->id, err->code, err->message));
    return;
  }
  auto& request = std::get<protocol::Request>(decoded);
  const std::string_view op = protocol::OpName(request.op);
  stats_.Received(op);
  if (auto refusal = Refusal(s, request)) {
    stats_.Failed(op, refusal->code);
    transport_.Send(sid, protocol::EncodeError(request.id, refusal->code, refusal->message));
    return;
  }
  ++s.inflight;
  if (std::holds_alternative<protocol::AcquireRequest>(request.op) ||
      std::holds_alternative<protocol::CampaignRequest>(request.op)) {
    s.asks.push_back({request.id.dump(), std::string(line), std::chrono::steady_clock::now()});
  }
  std::visit([&](const auto& decoded_op) { Handle(sid, request.id, decoded_op); }, request.op);
}

std::optional<Failure> LockService::Refusal(ClientSession& s, const protocol::Request& request) {
  if (options_.max_inflight > 0 && s.inflight >= options_.max_inflight) {
    stats_.limit_refusals[Limit::kInflight].Inc();
    return Failure{ErrorCode::kTooMany,
                   std::to_string(s.inflight) +
                       " requests of this connection are still unanswered "
                       "(max_inflight_per_session); read the replies before sending more"};
  }
  const auto taken = LocksTaken(request.op);
  if (taken.empty()) return std::nullopt;
  for (const std::string* resource : taken) {
    if (options_.access.Allows(s.ids, *resource)) continue;
    stats_.access_denied.Inc();
    // One warning per session: a client retrying in a loop must not flood the log.
    if (!s.denied_logged) {
      s.denied_logged = true;
      spdlog::warn("access denied: pid {} uid {} gid {} may not lock {} (no access rule "
                   "allows it; further refusals of session {} are logged at debug)",
                   s.peer.pid, s.peer.uid, s.peer.gid, nlohmann::json(*resource).dump(),
                   s.id);
    } else {
      spdlog::debug("access denied: session {} may not lock {}", s.id,
                    nlohmann::json(*resource).dump());
    }
    return Failure{ErrorCode::kForbidden,
                   "uid " + std::to_string(s.peer.uid) + " may not lock " +
                       (taken.size() > 1 ? nlohmann::json(*resource).dump() : "this resource") +
                       ": no access rule of the agent allows it"};
  }
  if (options_.max_locks > 0 && s.locks.commitments() + taken.size() > options_.max_locks) {
    stats_.limit_refusals[Limit::kLocksPerSession].Inc();
    return Failure{ErrorCode::kTooMany,
                   "this connection holds or awaits " + std::to_string(options_.max_locks) +
                       " locks (max_locks_per_session); release some first"};
  }
  const auto* acquire = std::get_if<protocol::AcquireRequest>(&request.op);
  return acquire != nullptr && acquire->detach ? LeaseLimit(s) : std::nullopt;
}

void LockService::Answer(SessionId sid, std::string line) {
  ClientSession* s = sessions_.Find(sid);
  if (s == nullptr) return;
  if (s->inflight > 0) --s->inflight;
  transport_.Send(sid, std::move(line));
}

void LockService::Asked(SessionId sid, const Id& id) {
  ClientSession* s = sessions_.Find(sid);
  if (s == nullptr) return;
  const std::string key = id.dump();
  for (auto it = s->asks.begin(); it != s->asks.end(); ++it) {
    if (it->id == key) {
      s->asks.erase(it);
      return;
    }
  }
}

void LockService::Fail(SessionId sid, const Id& id, std::string_view op,
                       const Failure& failure) {
  stats_.Failed(op, failure.code);
  Answer(sid, protocol::EncodeError(id, failure.code, failure.message));
}

void LockService::NotifyLost(SessionId session, const std::string& resource,
                             const std::string& token, std::string_view reason) {
  if (IsLeaseSession(session)) {
    leases_.Drop(resource, token);
    stats_.detached_leases.Set(static_cast<double>(leases_.size()));
  } else if (sessions_.Find(session) != nullptr) {
    transport_.Send(session, protocol::EncodeLost(resource, token, reason));
  }
}

Peer LockService::PeerOf(SessionId session) const {
  if (const ClientSession* s = sessions_.Find(session)) return s->peer;
  if (IsLeaseSession(session)) return LeasePeer(UidOfLeaseSession(session));
  return Peer{};
}

std::string LockService::Describe(SessionId session) const {
  if (IsLeaseSession(session)) {
    return "a detached lease of uid " + std::to_string(UidOfLeaseSession(session));
  }
  const Peer peer = PeerOf(session);
  if (peer.pid < 0) return "session " + std::to_string(session) + " (closed)";
  std::string who = "pid " + std::to_string(peer.pid);
  if (!peer.cmdline.empty()) who += " (" + peer.cmdline.substr(0, 80) + ")";
  return who;
}

std::vector<LockView> LockService::Locks() const {
  std::vector<LockView> locks = engine_.books().AllLocks();
  for (LockView& l : locks) FillHolder(l);
  return locks;
}

std::vector<LockView> LockService::ListedLocks(size_t limit,
                                               ResourceTable::GrantPairs* grants) const {
  std::vector<LockView> locks =
      engine_.books().ListedLocks(limit, std::chrono::steady_clock::now(), grants);
  for (LockView& l : locks) FillHolder(l);
  return locks;
}

std::vector<WaiterView> LockService::Waiters(size_t limit) const {
  std::vector<WaiterView> waiters = engine_.books().AllWaiters(limit);
  for (WaiterView& w : waiters) w.peer = PeerOf(w.session);
  return waiters;
}

}  // namespace lw
