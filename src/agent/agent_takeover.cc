// Agent: the new process's side of an in-place upgrade (agent/agent_upgrade.cc has the old
// one's, docs/upgrade.md the whole). Started with LOCKWARDEN_HANDOVER_FD, it connects to the
// masters, says it is ready, receives the state with the listening socket and every
// connection, takes them over, then says so; whatever it cannot take it refuses and exits,
// and the old process keeps serving.

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <unordered_set>

#include "agent/agent.h"
#include "agent/fd_passing.h"
#include "agent/handover_state.h"
#include "agent/phase_clock.h"

namespace lw {
namespace {

constexpr int64_t kMastersWaitMs = 3'000;  // ready with fewer usable masters after this
constexpr int64_t kStateTimeoutMs = 20'000;

// Milliseconds since a CLOCK_MONOTONIC time of the old process (the clock is the host's).
int64_t HeldMs(int64_t since_ns) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             now - std::chrono::nanoseconds(since_ns))
      .count();
}

}  // namespace

void Agent::AwaitMastersThenReady() {
  takeover_timer_ = std::make_unique<Timer>(loop_);
  const auto since = std::chrono::steady_clock::now();
  takeover_timer_->StartRepeat(5, [this, since] {
    int usable = 0;
    for (const auto& n : engine_->NodeStatuses()) usable += n.up && !n.quarantined ? 1 : 0;
    if (usable < engine_->quorum() &&
        std::chrono::steady_clock::now() - since < std::chrono::milliseconds(kMastersWaitMs)) {
      return;
    }
    takeover_timer_->Stop();
    const nlohmann::json ready = {{"ready", true},
                                  // "format": what 0.2.0 checks (it writes only 1)
                                  {"format", handover::kFormatJson},
                                  {"formats", handover::Formats()},
                                  {"version", LOCKWARDEN_VERSION},
                                  {"pid", static_cast<int>(getpid())}};
    if (auto why = handover::SendMessage(handover_fd_, ready.dump())) {
      RefuseTakeOver("cannot tell the running agent it is ready: " + *why);
    }
    ReceiveState();
  });
}

void Agent::ReceiveState() {
  // Format 3: pre-copy slices come first, entered as they come, while the old process serves.
  LockService::Staged staged;
  std::variant<handover::Message, std::string> got;
  for (;;) {
    got = handover::ReceiveMessage(handover_fd_, kStateTimeoutMs);
    if (const auto* why = std::get_if<std::string>(&got)) {
      return RefuseTakeOver("no state from the running agent: " + *why);
    }
    const std::string& payload = std::get<handover::Message>(got).payload;
    if (!handover::IsPreCopy(payload)) break;
    auto slice = handover::DecodePreCopy(payload);
    if (const auto* why = std::get_if<std::string>(&slice)) return RefuseTakeOver(*why);
    service_->Stage(std::get<handover::PreCopy>(slice), staged);
  }
  auto& msg = std::get<handover::Message>(got);
  PhaseClock phases;  // from the whole state's arrival
  auto decoded = handover::Decode(msg.payload);
  phases.Mark("decode");
  if (const auto* why = std::get_if<std::string>(&decoded)) return RefuseTakeOver(*why);
  auto& state = std::get<handover::State>(decoded);
  if (state.agent_id != fleet_->record().id) {
    return RefuseTakeOver("the running agent's id " + state.agent_id + " is not this one's (" +
                          fleet_->record().id + "): another socket path's id file?");
  }
  if (state.masters != MasterNames(cfg_) || state.key_prefix != cfg_.key_prefix ||
      state.fence_prefix != cfg_.fence_prefix) {
    return RefuseTakeOver("the masters, key_prefix or fence_prefix differ from the running "
                          "agent's: its locks live there; change them with a restart instead");
  }
  const auto fd_at = [&msg](int i) {
    return i >= 0 && static_cast<size_t>(i) < msg.fds.size() ? msg.fds[static_cast<size_t>(i)]
                                                              : -1;
  };
  if (fd_at(state.listener) < 0) return RefuseTakeOver("the state names no listening socket");
  if (auto problem = server_.AdoptListener(fd_at(state.listener), *service_)) {
    return RefuseTakeOver(*problem);
  }
  // The connections first, keeping their ids (the pre-copied holds name them); the pre-copied
  // holds brought up to date and the ended ones dropped before any hold is entered in full, so
  // that a resource whose kind changed meanwhile is free for its new holds.
  std::vector<SessionId> sids;
  std::unordered_set<SessionId> adopted;
  for (auto& s : state.sessions) {
    const int fd = fd_at(s.fd);
    const SessionId sid = fd < 0 ? 0 : server_.AdoptSession(fd, s.input, s.id);
    sids.push_back(sid);
    if (sid == 0) continue;
    adopted.insert(sid);
    service_->UpdateStaged(s.kept, staged, s.holds);
  }
  for (auto& l : state.leases) service_->UpdateStaged(l.kept, staged, l.holds);
  phases.Mark("connections");
  service_->DropStale(staged, state.gone, adopted);
  size_t sessions = 0;
  std::vector<std::pair<SessionId, handover::PendingAsk>> asks;
  for (size_t i = 0; i < state.sessions.size(); ++i) {
    const auto& s = state.sessions[i];
    const SessionId sid = sids[i];
    if (sid == 0) {
      spdlog::warn("a handed connection could not be served; its client reconnects");
      continue;
    }
    ++sessions;
    service_->Restore(sid, s);
    for (const auto& ask : s.asks) asks.emplace_back(sid, ask);
    if (!s.upgrade_id.empty()) {
      protocol::Upgraded u;
      u.pid = static_cast<int>(getpid());
      u.previous_pid = state.previous_pid;
      u.version = LOCKWARDEN_VERSION;
      u.handover_ms = 0;  // set as it is answered
      u.sessions = state.sessions.size();
      upgrade_reply_ = {sid, nlohmann::json::parse(s.upgrade_id, nullptr, false), u};
    }
  }
  service_->RestoreLeases(state.leases);
  // Every waiter asked again in the order it first came, whichever connection it came on.
  std::stable_sort(asks.begin(), asks.end(),
                   [](const auto& a, const auto& b) { return a.second.age_ms > b.second.age_ms; });
  service_->AskAgain(asks);
  const size_t locks = engine_->locks_held();
  phases.Mark("take over");
  if (auto problem = FinishStart(/*admin_required=*/false)) {
    spdlog::critical("{}", *problem);  // the connections are ours already: serve without admin
  }
  phases.Mark("start");
  spdlog::info("took over from pid {} (version {}, format {}): {} session(s), {} lock(s) ({} "
               "pre-copied in {} slice(s)); requests held for {} ms so far: {}",
               state.previous_pid, state.version, state.format, sessions, locks,
               staged.holds.size(), staged.slices, HeldMs(state.held_since_ns), phases.text());
  systemd_.MainPid(static_cast<int>(getpid()));
  const nlohmann::json took = {{"took_over", true}};
  handover::SendMessage(handover_fd_, took.dump());
  close(handover_fd_);
  handover_fd_ = -1;
  if (upgrade_reply_) {
    auto& [sid, id, u] = *upgrade_reply_;
    u.locks = locks;
    u.handover_ms = HeldMs(state.held_since_ns);
    service_->AnswerUpgrade(sid, id, protocol::EncodeUpgraded(id, u));
    upgrade_reply_.reset();
  }
}

void Agent::RefuseTakeOver(const std::string& why) {
  spdlog::critical("cannot take over from the running agent: {}; it keeps serving", why);
  const nlohmann::json refused = {{"refused", why}};
  handover::SendMessage(handover_fd_, refused.dump());
  close(handover_fd_);
  _exit(1);
}

}  // namespace lw
