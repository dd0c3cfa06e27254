// LockService's part of an in-place upgrade (agent/upgrade.h): what a connection holds, awaits
// and observes, captured for the next process and served again there.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "agent/elections.h"
#include "agent/lock_service.h"
#include "core/quote.h"
#include "protocol/messages.h"

namespace lw {
namespace {

int64_t AgeMs(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now() - since)
      .count();
}

bool Detaches(const std::string& line) {
  const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("detach") && j["detach"] == true;
}

}  // namespace

bool LockService::Settled(SessionId upgrading) const {
  bool settled = true;
  sessions_.ForEach([&](const ClientSession& s) {
    if (s.inflight != s.asks.size() + (s.id == upgrading ? 1 : 0)) settled = false;
  });
  return settled;
}

std::vector<handover::PendingAsk> LockService::TakeAsks(ClientSession& s) {
  std::vector<handover::PendingAsk> out;
  for (auto& ask : s.asks) {
    out.push_back({std::move(ask.line), AgeMs(ask.received)});
    if (Detaches(out.back().line) && s.detaching > 0) {
      --s.detaching;
      Undetaching(s.ids.uid, 1);
    }
  }
  s.inflight -= std::min(s.inflight, s.asks.size());
  s.asks.clear();
  return out;
}

std::vector<std::pair<SessionId, handover::PendingAsk>> LockService::TakeAsks() {
  std::vector<std::pair<SessionId, handover::PendingAsk>> all;
  sessions_.ForEach([&](ClientSession& s) {
    if (s.lease()) return;
    for (auto& ask : TakeAsks(s)) all.emplace_back(s.id, std::move(ask));
  });
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.second.age_ms > b.second.age_ms; });
  return all;
}

handover::State LockService::Capture(const std::vector<Server::Handed>& handed,
                                     std::vector<int>& fds, std::vector<SessionId>& ids,
                                     const Copied* copied) {
  handover::State state;
  // Every hold in full, or (pre-copied) the new ones in full and the others as updates.
  std::unordered_map<SessionId, std::vector<HandedHold>> holds;
  std::unordered_map<SessionId, std::vector<HoldUpdate>> updates;
  if (copied == nullptr) {
    holds = engine_.HoldsBySession();
  } else {
    engine_.ChangesSince(copied->serials, copied->touched, &holds, &updates, &state.gone);
  }
  const auto take = [&](SessionId sid, std::vector<HoldUpdate>& kept) {
    if (auto u = updates.find(sid); u != updates.end()) kept = std::move(u->second);
    auto it = holds.find(sid);
    return it == holds.end() ? std::vector<HandedHold>{} : std::move(it->second);
  };
  for (const auto& h : handed) {
    ClientSession* s = sessions_.Find(h.id);
    if (s == nullptr) continue;
    handover::SessionState out;
    out.id = h.id;
    out.fd = static_cast<int>(fds.size());
    fds.push_back(h.fd);
    ids.push_back(h.id);
    out.input = h.input;
    out.holds = take(h.id, out.kept);
    out.asks = TakeAsks(*s);
    out.observed.assign(s->observed.begin(), s->observed.end());
    state.sessions.push_back(std::move(out));
  }
  std::map<uid_t, handover::LeaseState> leases;
  sessions_.ForEach([&](const ClientSession& s) {
    if (!s.lease()) return;
    auto& l = leases[s.ids.uid];
    l.uid = s.ids.uid;
    l.holds = take(s.id, l.kept);
  });
  leases_.ForEach([&](const DetachedLease& lease) {
    auto& l = leases[UidOfLeaseSession(lease.session)];
    l.uid = UidOfLeaseSession(lease.session);
    l.creators.push_back({lease.resource, lease.token, lease.creator});
  });
  for (auto& [uid, l] : leases) state.leases.push_back(std::move(l));
  return state;
}

void LockService::Restore(SessionId sid, const handover::SessionState& state) {
  if (!state.upgrade_id.empty()) ++sessions_.Find(sid)->inflight;  // answered by the agent
  for (const auto& hold : state.holds) {
    if (auto refused = engine_.Adopt(sid, hold)) {
      spdlog::warn("lock {} of session {} not taken over from the previous process: {}",
                   QuoteClientText(hold.resource), sid, refused->message);
      transport_.Send(sid, protocol::EncodeLost(hold.resource, hold.token, "upgrade"));
    }
  }
  if (options_.elections != nullptr) {
    for (const auto& name : state.observed) {
      options_.elections->Observe(sid, name, [](const auto&) {});
    }
  }
}

void LockService::AnswerUpgrade(SessionId sid, const nlohmann::json& id,
                                const std::variant<std::string, Failure>& answer) {
  if (const auto* f = std::get_if<Failure>(&answer)) return Fail(sid, id, "upgrade", *f);
  Answer(sid, std::get<std::string>(answer));
}

void LockService::AskAgain(const std::vector<std::pair<SessionId, handover::PendingAsk>>& asks) {
  for (const auto& [sid, ask] : asks) {
    if (sessions_.Find(sid) == nullptr) continue;
    Line(sid, handover::Aged(ask.line, ask.age_ms));
  }
}

void LockService::RestoreLeases(const std::vector<handover::LeaseState>& leases) {
  for (const auto& l : leases) {
    const SessionId lease = LeaseSession(l.uid).id;
    for (const auto& hold : l.holds) {
      if (auto refused = engine_.Adopt(lease, hold)) {
        spdlog::warn("detached lease on {} not taken over from the previous process: {}",
                     QuoteClientText(hold.resource), refused->message);
      }
    }
    // Its holds here, adopted above or pre-copied before (format 3).
    for (const auto& c : l.creators) {
      const Holder* h = engine_.books().FindHolder(c.resource, c.token);
      if (h != nullptr && h->session == lease) {
        leases_.Add({c.resource, c.token, h->serial, lease, c.creator});
      }
    }
  }
  stats_.detached_leases.Set(static_cast<double>(leases_.size()));
}

}  // namespace lw
