#include "fleet/revoke.h"

#include <map>
#include <thread>

#include "core/redlock_math.h"
#include "fleet/master_links.h"
#include "redis/scripts.h"

namespace lw::fleet {
namespace {

using SteadyClock = std::chrono::steady_clock;

// How often the key is read again while the holder's agent revokes it.
constexpr std::chrono::milliseconds kRecheckEvery{10};

// What the masters hold for `key` (master index → value), and whether `agent_id`'s entry
// exists on any of them (agent_id empty: not asked). Masters that fail are left out.
struct KeyRead {
  std::map<size_t, std::string> values;
  int answered = 0;
  bool agent_listed = false;
};

KeyRead ReadKey(MasterLinks& links, const std::string& key, const std::string& agent_id) {
  KeyRead read;
  std::vector<Command> commands = {{"GET", key}};
  if (!agent_id.empty()) commands.push_back({"EXISTS", AgentKey(agent_id)});
  for (size_t i = 0; i < links.size(); ++i) {
    auto replies = links.Pipeline(i, commands);
    if (std::holds_alternative<std::string>(replies)) continue;
    const auto& rs = std::get<std::vector<Reply>>(replies);
    if (rs[0].kind == Reply::Kind::kError) continue;
    ++read.answered;
    if (rs[0].kind == Reply::Kind::kString) read.values[i] = rs[0].text;
    if (rs.size() > 1 && rs[1].kind == Reply::Kind::kInteger && rs[1].integer > 0) {
      read.agent_listed = true;
    }
  }
  return read;
}

// The value a quorum of masters hold, if any.
std::optional<std::string> QuorumValue(const KeyRead& read, int quorum) {
  std::map<std::string, int> counts;
  for (const auto& [master, value] : read.values) {
    if (++counts[value] >= quorum) return value;
  }
  return std::nullopt;
}

// Masters holding `value` for `key`, re-read.
int Holding(MasterLinks& links, const std::string& key, const std::string& value) {
  int n = 0;
  for (const auto& [master, v] : ReadKey(links, key, "").values) n += v == value ? 1 : 0;
  return n;
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

// Waits up to `wait` for `value` to leave a quorum of masters; true when it did.
bool AwaitGone(MasterLinks& links, const std::string& key, const std::string& value, int quorum,
               std::chrono::milliseconds wait) {
  const auto deadline = SteadyClock::now() + wait;
  while (true) {
    if (Holding(links, key, value) < quorum) return true;
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(kRecheckEvery);
  }
}

// Compare-and-delete with the release announcement on every master; masters that deleted.
int DeleteEverywhere(MasterLinks& links, const std::string& key, const std::string& value) {
  int deleted = 0;
  const Command command = {"EVAL", scripts::kDeleteIfHeld, "1", key, value,
                           scripts::ReleaseChannel(key)};
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
  const std::string key = request.key_prefix + request.resource;
  KeyRead read = ReadKey(links, key, "");
  result.masters_read = read.answered;
  if (read.answered < quorum) {
    result.error = "only " + std::to_string(read.answered) + " of " +
                   std::to_string(request.masters.size()) +
                   " masters answered; a revoke needs a quorum of " + std::to_string(quorum);
    return result;
  }
  const std::optional<std::string> value = QuorumValue(read, quorum);
  if (!value) {
    result.how = RevokeResult::How::kNotHeld;
    return result;
  }
  const std::optional<std::string> agent = AgentOfValue(*value);
  if (agent) {
    result.agent_id = *agent;
    if (ReadKey(links, key, *agent).agent_listed) {
      result.receivers = Publish(links, *agent, {key, *value, request.by});
    }
    if (result.receivers > 0 && AwaitGone(links, key, *value, quorum, request.wait)) {
      result.how = RevokeResult::How::kByHolderAgent;
      return result;
    }
  }
  result.deleted = DeleteEverywhere(links, key, *value);
  result.how = RevokeResult::How::kDeleted;
  return result;
}

}  // namespace lw::fleet
