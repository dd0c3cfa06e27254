// LockService: an acquire of several resources at once ("resources", docs/protocol.md
// "Several resources at once"). They are taken one after the other in their canonical order
// (sorted bytewise, as decoded), each through the engine as a plain acquire of this session
// with what is left of the one wait, and answered together: every grant, or the first failure
// once the grants so far are let go of. Two such acquires never wait for each other in a cycle:
// each waits only for a resource later in the order than every one it holds (docs/safety.md
// §13). Once answered, the grants are holds like any other: renewed, released and lost each by
// its token; the packaged clients hold and lose them as one.

#include <algorithm>
#include <chrono>

#include "agent/lock_service.h"
#include "locking/failure_text.h"

namespace lw {

struct LockService::MultiAcquire {
  SessionId sid = 0;
  Id id;
  protocol::AcquireRequest op;
  std::chrono::steady_clock::time_point started, deadline;
  std::vector<Grant> granted;  // of op.resources[0..], in order
  std::vector<std::chrono::steady_clock::time_point> granted_at;
};

void LockService::AcquireAll(SessionId sid, const Id& id, const protocol::AcquireRequest& op) {
  auto m = std::make_shared<MultiAcquire>();
  m->sid = sid;
  m->id = id;
  m->op = op;
  m->started = std::chrono::steady_clock::now();
  m->deadline = m->started + std::chrono::milliseconds(op.wait_ms);
  multis_[sid].push_back(m);
  NextOfAll(m);
}

void LockService::NextOfAll(const std::shared_ptr<MultiAcquire>& m) {
  const auto now = std::chrono::steady_clock::now();
  const size_t i = m->granted.size();
  if (i == m->op.resources.size()) {
    ForgetMulti(m);
    Asked(m->sid, m->id);
    std::vector<protocol::GrantOfMany> grants;
    for (size_t k = 0; k < i; ++k) {
      const Grant& g = m->granted[k];
      const int64_t left = g.validity_ms - CeilMs(now - m->granted_at[k]);
      if (left <= 0) {  // an early grant ran out while later ones were awaited
        LetGoOfAll(*m);
        return Fail(m->sid, m->id, "acquire", ValidityRanOutBeforeReply());
      }
      grants.push_back({m->op.resources[k], g.token, left, g.waited_ms, g.fence, g.mode, g.permit});
    }
    return Answer(m->sid, protocol::EncodeAcquiredMany(m->id, grants, CeilMs(now - m->started)));
  }
  const int64_t wait_ms = std::max<int64_t>(0, CeilMs(m->deadline - now));
  const protocol::AcquireRequest& op = m->op;
  engine_.Acquire(
      m->sid, op.resources[i], op.ttl_ms, wait_ms, op.renew,
      [this, m, i](const std::variant<Grant, Failure>& result) {
        if (const auto* g = std::get_if<Grant>(&result)) {
          m->granted.push_back(*g);
          m->granted_at.push_back(std::chrono::steady_clock::now());
          return NextOfAll(m);
        }
        ForgetMulti(m);
        LetGoOfAll(*m);
        Asked(m->sid, m->id);
        const Failure& f = std::get<Failure>(result);
        Fail(m->sid, m->id, "acquire",
             Failure{f.code, "resources[" + std::to_string(i) + "] " +
                                 nlohmann::json(m->op.resources[i]).dump() + ": " + f.message +
                                 " (none of the " + std::to_string(m->op.resources.size()) +
                                 " resources is held)"});
      },
      op.fence,
      AcquireKind{.shape = op.permits > 0 ? LockShape{LockKind::kSemaphore, op.permits}
                                          : LockShape{},
                  .shared = op.shared,
                  .hold_as = 0,
                  .payload = {},
                  .owner = op.owner,
                  .reentrant = false});
}

void LockService::ForgetMulti(const std::shared_ptr<MultiAcquire>& m) {
  const auto it = multis_.find(m->sid);
  if (it == multis_.end()) return;  // the session closed, or an upgrade let go of it
  auto& list = it->second;
  list.erase(std::remove(list.begin(), list.end(), m), list.end());
  if (list.empty()) multis_.erase(it);
}

void LockService::LetGoOfAll(MultiAcquire& m) {
  for (size_t k = 0; k < m.granted.size(); ++k) {
    engine_.Release(m.sid, m.op.resources[k], m.granted[k].token,
                    [](const std::optional<Failure>&) {});
  }
  m.granted.clear();
  m.granted_at.clear();
}

void LockService::DropPartialAcquires() {
  for (auto& [sid, list] : multis_) {
    for (auto& m : list) LetGoOfAll(*m);
  }
  multis_.clear();
}

}  // namespace lw
