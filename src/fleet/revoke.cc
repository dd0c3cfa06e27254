#include "fleet/revoke.h"

#include <map>
#include <set>
#include <thread>

#include "core/key_parts.h"
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
using KeyValue = std::pair<std::string, std::string>;

// What the masters hold of one resource: each hold with the masters showing it, and whether
// the agent asked about is listed. Masters that fail are left out.
struct HoldsRead {
  std::map<KeyValue, int> masters;  // hold -> masters holding it
  int answered = 0;
  bool agent_listed = false;
};

// The parts of `req`'s resource to read on each master: the base key, the readers set when a
// hold id is asked for, and the permit asked for (or, for a hold id, every permit of K).
std::vector<KeyPart> PartsToRead(const RevokeRequest& req, int permits) {
  using Part = KeyPart::Part;
  std::vector<KeyPart> parts = {{req.resource, Part::kBase}};
  if (req.permit) parts.push_back({req.resource, Part::kPermit, *req.permit});
  if (req.hold.empty()) return parts;
  parts.push_back({req.resource, Part::kReaders});
  for (int i = 0; i < permits && !req.permit; ++i)
    parts.push_back({req.resource, Part::kPermit, i});
  return parts;
}

// Each part's ListCommand (members without scores: a revoke names a reader by its value).
std::vector<Command> ReadCommands(const RevokeRequest& req, int permits) {
  std::vector<Command> commands;
  for (const KeyPart& part : PartsToRead(req, permits)) {
    commands.push_back(ListCommand(RowOf(part.part), KeyOfPart(req.key_prefix, part),
                                   kMaxReadersSought, /*scores=*/false));
  }
  return commands;
}

// Adds the holds `rs` (replies of `commands`) show on one master.
void AddHolds(const std::vector<Command>& commands, const std::vector<Reply>& rs,
              std::set<KeyValue>& out) {
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
    std::set<KeyValue> here;
    AddHolds(commands, rs, here);
    for (const KeyValue& h : here) {
      if (IsHold(RowToRead(req.key_prefix, h.first), h.second)) ++read.masters[h];
    }
  }
  return read;
}

// The hold `req` names that the most masters show, if a quorum does.
std::optional<KeyValue> Target(const RevokeRequest& req, const HoldsRead& read, int quorum) {
  const std::string base = req.key_prefix + req.resource;
  const std::string permit =
      req.permit ? PermitKey(req.key_prefix, req.resource, *req.permit) : std::string();
  std::optional<KeyValue> best;
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

// Masters still showing `hold`, in `part` (its CheckCommand).
int Holding(MasterLinks& links, const KeyPart& part, const KeyValue& hold) {
  const KeyPartRow& row = RowOf(part.part);
  const Command command = CheckCommand(row, hold.first, hold.second);
  int n = 0;
  for (size_t i = 0; i < links.size(); ++i) {
    auto replies = links.Pipeline(i, {command});
    if (std::holds_alternative<std::string>(replies)) continue;
    const Reply& r = std::get<std::vector<Reply>>(replies)[0];
    if (r.kind != Reply::Kind::kString) continue;
    n += CheckAnswerHolds(row, r.text, hold.second) ? 1 : 0;
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
bool AwaitGone(MasterLinks& links, const RevokeRequest& req, const KeyPart& part,
               const KeyValue& hold, int quorum) {
  const auto deadline = SteadyClock::now() + req.wait;
  while (true) {
    if (Holding(links, part, hold) < quorum) return true;
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(kRecheckEvery);
  }
}

const char* ScriptText(RemovalScript script) {
  switch (script) {
    case RemovalScript::kDeleteIfHeld:
      return scripts::kDeleteIfHeld;
    case RemovalScript::kDeleteWithRecord:
      return scripts::kDeleteWithRecord;
    case RemovalScript::kReleaseShared:
      return scripts::kReleaseShared;
  }
  return scripts::kDeleteIfHeld;
}

// The part's removal (core/key_parts.h RemovalOf) with the release announcement on the
// resource's channel, on every master. Masters that removed it.
int RemoveEverywhere(MasterLinks& links, const RevokeRequest& req, const KeyPart& part,
                     const KeyValue& hold) {
  const std::optional<RemovalCommand> removal = RemovalOf(
      req.key_prefix, part, hold.second, scripts::ReleaseChannel(req.key_prefix + req.resource));
  if (!removal) return 0;
  Command command = {"EVAL", ScriptText(removal->script)};
  for (std::string& word : EvalTail(*removal)) command.push_back(std::move(word));
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
  const std::optional<KeyValue> hold = Target(request, read, quorum);
  if (!hold) {
    result.how = RevokeResult::How::kNotHeld;
    return result;
  }
  // Every key read was built from a part of the resource (PartsToRead).
  const KeyPart part =
      ParseLockKey(request.key_prefix, hold->first).value_or(KeyPart{request.resource});
  result.mode = RowOf(part.part).mode;
  result.permit = part.permit;
  if (const std::optional<std::string> agent = AgentOfValue(hold->second)) {
    result.agent_id = *agent;
    if (Listed(links, *agent)) {
      result.receivers = Publish(links, *agent, {hold->first, hold->second, request.by});
    }
    if (result.receivers > 0 && AwaitGone(links, request, part, *hold, quorum)) {
      result.how = RevokeResult::How::kByHolderAgent;
      return result;
    }
  }
  result.deleted = RemoveEverywhere(links, request, part, *hold);
  result.how = RevokeResult::How::kDeleted;
  return result;
}

}  // namespace lw::fleet
