#include "fleet/revoke.h"

#include <map>
#include <set>
#include <thread>

#include "core/lock_kind.h"
#include "core/redlock_math.h"
#include "fleet/master_links.h"
#include "redis/kind_scripts.h"
#include "redis/scripts.h"

namespace lw::fleet {
namespace {

using SteadyClock = std::chrono::steady_clock;

// How often the key is read again while the holder's agent revokes it.
constexpr std::chrono::milliseconds kRecheckEvery{10};

// Readers read per master when looking for one by its hold id.
constexpr int kMaxReadersSought = 1000;

// One hold as the masters show it: a key, and the value it (or, for a readers set, one of its
// members) holds.
using Hold = std::pair<std::string, std::string>;

// What the masters hold of one resource: each hold with the masters showing it, and whether
// the agent asked about is listed. Masters that fail are left out.
struct HoldsRead {
  std::map<Hold, int> masters;  // hold -> masters holding it
  int answered = 0;
  bool agent_listed = false;
};

// The keys of `req`'s resource to read on each master: the base key, the readers set when a
// hold id is asked for, and the permit asked for (or, for a hold id, every permit of K).
std::vector<Command> ReadCommands(const RevokeRequest& req, int permits) {
  std::vector<Command> commands = {{"GET", req.key_prefix + req.resource}};
  if (req.permit) commands.push_back({"GET", PermitKey(req.key_prefix, req.resource, *req.permit)});
  if (req.hold.empty()) return commands;
  commands.push_back({"ZRANGE", ReadersKey(req.key_prefix, req.resource), "0",
                      std::to_string(kMaxReadersSought - 1)});
  for (int i = 0; i < permits && !req.permit; ++i) {
    commands.push_back({"GET", PermitKey(req.key_prefix, req.resource, i)});
  }
  return commands;
}

// Adds the holds `rs` (replies of `commands`) show on one master.
void AddHolds(const std::vector<Command>& commands, const std::vector<Reply>& rs,
              std::set<Hold>& out) {
  for (size_t i = 0; i < commands.size() && i < rs.size(); ++i) {
    const std::string& key = commands[i][1];
    if (rs[i].kind == Reply::Kind::kString) out.insert({key, rs[i].text});
    if (rs[i].kind != Reply::Kind::kArray) continue;
    for (const Reply& member : rs[i].elements) out.insert({key, member.text});
  }
}

HoldsRead ReadHolds(MasterLinks& links, const RevokeRequest& req) {
  HoldsRead read;
  for (size_t m = 0; m < links.size(); ++m) {
    std::vector<Command> commands = ReadCommands(req, 0);
    auto replies = links.Pipeline(m, commands);
    if (std::holds_alternative<std::string>(replies)) continue;
    auto rs = std::get<std::vector<Reply>>(std::move(replies));
    if (rs[0].kind == Reply::Kind::kError) continue;
    // A hold id may name a permit: a semaphore's marker says how many there are.
    const std::optional<LockShape> shape =
        rs[0].kind == Reply::Kind::kString ? ShapeOfMarker(rs[0].text) : std::nullopt;
    if (shape && !req.hold.empty() && !req.permit) {
      commands = ReadCommands(req, shape->permits);
      auto again = links.Pipeline(m, commands);
      if (std::holds_alternative<std::string>(again)) continue;
      rs = std::get<std::vector<Reply>>(std::move(again));
    }
    ++read.answered;
    std::set<Hold> here;
    AddHolds(commands, rs, here);
    for (const Hold& h : here) {
      if (!ShapeOfMarker(h.second)) ++read.masters[h];
    }
  }
  return read;
}

// The hold `req` names that the most masters show, if a quorum does.
std::optional<Hold> Target(const RevokeRequest& req, const HoldsRead& read, int quorum) {
  const std::string base = req.key_prefix + req.resource;
  const std::string permit =
      req.permit ? PermitKey(req.key_prefix, req.resource, *req.permit) : std::string();
  std::optional<Hold> best;
  int most = 0;
  for (const auto& [hold, masters] : read.masters) {
    const bool named = !req.hold.empty() ? HoldId(hold.second) == req.hold &&
                                               (!req.permit || hold.first == permit)
                       : req.permit  ? hold.first == permit
                                     : hold.first == base;
    if (named && masters > most) {
      best = hold;
      most = masters;
    }
  }
  if (most < quorum) return std::nullopt;
  return best;
}

bool IsReaders(const RevokeRequest& req, const std::string& key) {
  return key == ReadersKey(req.key_prefix, req.resource);
}

// Masters still showing `hold` (GET of its key, or ZSCORE of a reader).
int Holding(MasterLinks& links, const RevokeRequest& req, const Hold& hold) {
  const bool reader = IsReaders(req, hold.first);
  const Command command = reader ? Command{"ZSCORE", hold.first, hold.second}
                                 : Command{"GET", hold.first};
  int n = 0;
  for (size_t i = 0; i < links.size(); ++i) {
    auto replies = links.Pipeline(i, {command});
    if (std::holds_alternative<std::string>(replies)) continue;
    const Reply& r = std::get<std::vector<Reply>>(replies)[0];
    if (r.kind != Reply::Kind::kString) continue;
    n += reader || r.text == hold.second ? 1 : 0;
  }
  return n;
}

// Whether `agent_id`'s registry entry exists on some master.
bool Listed(MasterLinks& links, const std::string& agent_id) {
  for (size_t i = 0; i < links.size(); ++i) {
    auto replies = links.Pipeline(i, {{"EXISTS", AgentKey(agent_id)}});
    if (std::holds_alternative<std::string>(replies)) continue;
    const Reply& r = std::get<std::vector<Reply>>(replies)[0];
    if (r.kind == Reply::Kind::kInteger && r.integer > 0) return true;
  }
  return false;
}

// Publishes the order on every master; the subscribers it reached, summed.
int Publish(MasterLinks& links, const std::string& agent_id, const RevokeOrder& order) {
  int receivers = 0;
  const std::string text = Encode(order);
  for (size_t i = 0; i < links.size(); ++i) {
    auto replies = links.Pipeline(i, {{"PUBLISH", RevokeChannel(agent_id), text}});
    if (std::holds_alternative<std::string>(replies)) continue;
    const Reply& r = std::get<std::vector<Reply>>(replies)[0];
    if (r.kind == Reply::Kind::kInteger) receivers += static_cast<int>(r.integer);
  }
  return receivers;
}

// Waits up to `wait` for `hold` to leave a quorum of masters; true when it did.
bool AwaitGone(MasterLinks& links, const RevokeRequest& req, const Hold& hold, int quorum) {
  const auto deadline = SteadyClock::now() + req.wait;
  while (true) {
    if (Holding(links, req, hold) < quorum) return true;
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(kRecheckEvery);
  }
}

// Compare-and-remove with the release announcement on the resource's channel, on every
// master: a reader's member with ZREM, any other key with DEL. Masters that removed it.
int RemoveEverywhere(MasterLinks& links, const RevokeRequest& req, const Hold& hold) {
  const std::string channel = scripts::ReleaseChannel(req.key_prefix + req.resource);
  const Command command =
      IsReaders(req, hold.first)
          ? Command{"EVAL", scripts::kReleaseShared, "1", hold.first, hold.second, channel}
          : Command{"EVAL", scripts::kDeleteIfHeld, "1", hold.first, hold.second, channel};
  int deleted = 0;
  for (size_t i = 0; i < links.size(); ++i) {
    auto replies = links.Pipeline(i, {command});
    if (std::holds_alternative<std::string>(replies)) continue;
    const Reply& r = std::get<std::vector<Reply>>(replies)[0];
    deleted += r.kind == Reply::Kind::kInteger && r.integer == 1 ? 1 : 0;
  }
  return deleted;
}

}  // namespace

std::string_view HowName(RevokeResult::How how) {
  switch (how) {
    case RevokeResult::How::kNotHeld:
      return "not_held";
    case RevokeResult::How::kByHolderAgent:
      return "holder_agent";
    case RevokeResult::How::kDeleted:
      return "deleted";
    case RevokeResult::How::kFailed:
      return "failed";
  }
  return "failed";
}

RevokeResult RevokeInFleet(const RevokeRequest& request) {
  RevokeResult result;
  MasterLinks links(request.masters, request.connect_timeout, request.command_timeout,
                    "fleet revoke");
  const int quorum = QuorumSize(static_cast<int>(request.masters.size()));
  const HoldsRead read = ReadHolds(links, request);
  result.masters_read = read.answered;
  if (read.answered < quorum) {
    result.error = "only " + std::to_string(read.answered) + " of " +
                   std::to_string(request.masters.size()) +
                   " masters answered; a revoke needs a quorum of " + std::to_string(quorum);
    return result;
  }
  const std::optional<Hold> hold = Target(request, read, quorum);
  if (!hold) {
    result.how = RevokeResult::How::kNotHeld;
    return result;
  }
  if (const std::optional<KeyPart> part = ParseLockKey(request.key_prefix, hold->first)) {
    result.mode = part->part == KeyPart::Part::kPermit    ? HoldMode::kPermit
                  : part->part == KeyPart::Part::kReaders ? HoldMode::kShared
                                                          : HoldMode::kExclusive;
    result.permit = part->permit;
  }
  if (const std::optional<std::string> agent = AgentOfValue(hold->second)) {
    result.agent_id = *agent;
    if (Listed(links, *agent)) {
      result.receivers = Publish(links, *agent, {hold->first, hold->second, request.by});
    }
    if (result.receivers > 0 && AwaitGone(links, request, *hold, quorum)) {
      result.how = RevokeResult::How::kByHolderAgent;
      return result;
    }
  }
  result.deleted = RemoveEverywhere(links, request, *hold);
  result.how = RevokeResult::How::kDeleted;
  return result;
}

}  // namespace lw::fleet
