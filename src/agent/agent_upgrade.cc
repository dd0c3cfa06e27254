// Agent: the in-place upgrade (docs/upgrade.md). The running agent starts the binary now at its
// path with one end of a socket pair (LOCKWARDEN_HANDOVER_FD); the new process connects to the
// masters and says it is ready; the old one stops reading requests, drops its waiters (their
// requests are asked again by whoever serves next), waits until every other request is
// answered and written, and sends its state (agent/handover_state.h) with the listening socket
// and every connection (agent/fd_passing.h). The new process takes the holds over with no round
// trip, serves the connections and says it took over; only then does the old one exit, leaving
// every lock on the masters. Any failure before that leaves the old agent serving as before.

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include "agent/agent.h"
#include "agent/fd_passing.h"
#include "agent/handover_state.h"
#include "agent/phase_clock.h"

extern char** environ;

namespace lw {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kReadyTimeoutMs = 15'000;   // the new process starts and reaches its masters
constexpr int64_t kSettleTimeoutMs = 3'000;   // requests in flight are answered
constexpr int64_t kVerdictTimeoutMs = 10'000;  // the new process takes the state over
constexpr int kChildChannelFd = 3;

std::string BinaryPath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  const std::string deleted = " (deleted)";  // the package replaced the file under us
  if (path.size() > deleted.size() && path.ends_with(deleted)) path.resize(path.size() - deleted.size());
  return path;
}

std::vector<std::string> OwnArguments() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t at = 0;
  while (at < raw.size()) {
    const size_t end = raw.find('\0', at);
    args.push_back(raw.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return args;
}


int64_t MsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

// The formats a new process's ready message says it reads: "formats", or only "format" from a
// build that sends that alone (0.2.0 reads format 1 only).
std::vector<int> ReadsFormats(const nlohmann::json& ready) {
  std::vector<int> out;
  if (!ready.is_object()) return out;
  const auto& list = ready.value("formats", nlohmann::json::array({ready.value("format", 0)}));
  if (!list.is_array()) return out;
  for (const auto& f : list) {
    if (f.is_number_integer()) out.push_back(f.get<int>());
  }
  return out;
}

}  // namespace

void Agent::BeginUpgrade(SessionId requester, const nlohmann::json& id, NextBinary next) {
  if (upgrade_ || shutting_down_ || handover_fd_ >= 0) {
    const std::string why = upgrade_ ? "an upgrade is already in progress"
                                     : "the agent is stopping or still taking over";
    if (requester != 0) {
      service_->AnswerUpgrade(requester, id, Failure{ErrorCode::kUnavailable, why});
    }
    spdlog::warn("upgrade refused: {}", why);
    return;
  }
  upgrade_ = std::make_unique<Upgrade>();
  upgrade_->requester = requester;
  upgrade_->id = id;
  // /proc/self/exe, exec'd by the child, is the file this process runs even when a package
  // has replaced the path since.
  const std::string binary = next == NextBinary::kRunning ? "/proc/self/exe" : BinaryPath();
  int pair[2];
  if (binary.empty() || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return AbortUpgrade("cannot prepare the hand-over: " + std::string(std::strerror(errno)));
  }
  upgrade_->channel = pair[0];
  std::vector<std::string> args = OwnArguments();
  if (args.empty()) args.push_back(binary);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    // WATCHDOG_PID names this process: the new one would not feed systemd's watchdog.
    if (std::strncmp(*e, "LOCKWARDEN_HANDOVER_FD=", 23) != 0 &&
        std::strncmp(*e, "WATCHDOG_PID=", 13) != 0) {
      env_strings.emplace_back(*e);
    }
  }
  env_strings.push_back("LOCKWARDEN_HANDOVER_FD=" + std::to_string(kChildChannelFd));
  std::vector<char*> env;
  for (auto& e : env_strings) env.push_back(e.data());
  env.push_back(nullptr);
  uv_stdio_container_t stdio[4];
  for (int i = 0; i < 3; ++i) {
    stdio[i].flags = UV_INHERIT_FD;
    stdio[i].data.fd = i;
  }
  stdio[3].flags = UV_INHERIT_FD;
  stdio[3].data.fd = pair[1];
  uv_process_options_t options{};
  options.file = binary.c_str();
  options.args = argv.data();
  options.env = env.data();
  options.stdio = stdio;
  options.stdio_count = 4;
  options.exit_cb = [](uv_process_t* p, int64_t status, int sig) {
    auto* self = static_cast<Agent*>(p->data);
    uv_close(reinterpret_cast<uv_handle_t*>(p),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_process_t*>(h); });
    if (self == nullptr || !self->upgrade_ || self->upgrade_->child != p) return;
    self->upgrade_->child = nullptr;
    self->AbortUpgrade("the new process exited (" +
                       (sig != 0 ? "signal " + std::to_string(sig)
                                 : "status " + std::to_string(status)) +
                       ") before it took over; its log says why");
  };
  auto* child = new uv_process_t;
  child->data = this;
  const int rc = uv_spawn(loop_, child, &options);
  close(pair[1]);
  if (rc != 0) {
    delete child;
    return AbortUpgrade("cannot start " + binary + ": " + uv_strerror(rc));
  }
  upgrade_->child = child;
  upgrade_->child_pid = child->pid;
  spdlog::info("upgrade: started {} as pid {}; handing over once it reaches its masters", binary,
               child->pid);
  upgrade_->deadline = std::make_unique<Timer>(loop_);
  upgrade_->deadline->Start(kReadyTimeoutMs, [this] {
    AbortUpgrade("the new process did not say it was ready within " +
                 std::to_string(kReadyTimeoutMs) + " ms");
  });
  upgrade_->poll = new uv_poll_t;
  uv_poll_init(loop_, upgrade_->poll, upgrade_->channel);
  upgrade_->poll->data = this;
  uv_poll_start(upgrade_->poll, UV_READABLE, [](uv_poll_t* p, int, int) {
    static_cast<Agent*>(p->data)->OnChildMessage();
  });
}

void Agent::OnChildMessage() {
  auto got = handover::ReceiveMessage(upgrade_->channel, 1'000);
  if (const auto* why = std::get_if<std::string>(&got)) {
    return AbortUpgrade("the hand-over channel failed: " + *why);
  }
  const auto msg = nlohmann::json::parse(std::get<handover::Message>(got).payload, nullptr, false);
  if (!upgrade_->sent) {
    upgrade_->format = handover::FormatFor(ReadsFormats(msg));
    if (upgrade_->format == 0) {
      return AbortUpgrade("the new process reads hand-over format(s) " +
                          (msg.is_object() ? msg.value("formats", msg.value("format", nlohmann::json())).dump() : "?") +
                          ", this one writes 1 to " + std::to_string(handover::kFormat));
    }
    upgrade_->child_version = msg.value("version", "");
    return upgrade_->format >= handover::kFormatPreCopied ? PreCopy() : HoldForHandOver();
  }
  if (msg.is_object() && msg.value("took_over", false)) return HandedOver();
  AbortUpgrade(msg.is_object() && msg.contains("refused")
                   ? "the new process refused the state: " + msg["refused"].get<std::string>()
                   : "the new process answered " + msg.dump());
}

void Agent::HoldForHandOver() {
  uv_poll_stop(upgrade_->poll);
  upgrade_->held = true;
  upgrade_->held_at = Clock::now();
  server_.Hold(true);
  service_->DropPartialAcquires();  // asked again whole, by whichever process serves next
  const size_t dropped = engine_->DropWaiters();
  spdlog::info("upgrade: pid {} (version {}) is ready; requests held, {} waiter(s) to be asked "
               "again there", upgrade_->child_pid, upgrade_->child_version, dropped);
  upgrade_->deadline->Start(kSettleTimeoutMs, [this] {
    AbortUpgrade("requests in flight were not answered within " +
                 std::to_string(kSettleTimeoutMs) + " ms");
  });
  upgrade_->settle = std::make_unique<Timer>(loop_);
  upgrade_->settle->StartRepeat(1, [this] {
    if (!service_->Settled(upgrade_->requester) || !server_.Flushed() ||
        engine_->AttemptsInFlight()) {
      return;
    }
    upgrade_->settle->Stop();
    if (upgrade_->format < handover::kFormatReentrant && engine_->AnyReentered()) {
      return AbortUpgrade("a lock is held reentrantly (more than once by one owner), which "
                          "hand-over format " + std::to_string(upgrade_->format) +
                          " of the new process cannot carry; upgrade once no lock is");
    }
    upgrade_->settle_ms = MsBetween(upgrade_->held_at, Clock::now());
    SendState();
  });
}

void Agent::SendState() {
  // The admin port is the new process's from here on.
  if (presence_) presence_->Stop();
  if (admin_) admin_->Stop();
  upgrade_->admin_stopped = true;
  PhaseClock phases;
  std::vector<int> fds{server_.ListenerFd()};
  const auto handed = server_.HandOver();
  std::vector<SessionId> ids;
  const bool precopied = upgrade_->format >= handover::kFormatPreCopied;
  handover::State state =
      service_->Capture(handed, fds, ids, precopied ? &upgrade_->copied : nullptr);
  engine_->TrackChanges(nullptr);
  state.format = upgrade_->format;
  state.version = LOCKWARDEN_VERSION;
  state.agent_id = fleet_->record().id;
  state.masters = MasterNames(cfg_);
  state.key_prefix = cfg_.key_prefix;
  state.fence_prefix = cfg_.fence_prefix;
  state.listener = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    for (auto& ask : state.sessions[i].asks) upgrade_->taken.emplace_back(ids[i], ask);
    if (ids[i] == upgrade_->requester) state.sessions[i].upgrade_id = upgrade_->id.dump();
  }
  std::stable_sort(upgrade_->taken.begin(), upgrade_->taken.end(),
                   [](const auto& a, const auto& b) { return a.second.age_ms > b.second.age_ms; });
  state.held_since_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            upgrade_->held_at.time_since_epoch())
                            .count();
  state.previous_pid = static_cast<int>(getpid());
  upgrade_->sent = true;
  phases.Mark("capture");
  const std::string encoded = handover::Encode(state);
  phases.Mark("encode");
  if (auto why = handover::SendMessage(upgrade_->channel, encoded, fds)) {
    return AbortUpgrade("cannot send the state: " + *why);
  }
  phases.Mark("send");
  spdlog::info("upgrade: state sent in format {} ({} bytes, {} descriptors) {} ms after "
               "holding requests (settle {} ms): {}",
               state.format, encoded.size(), fds.size(), MsBetween(upgrade_->held_at, Clock::now()),
               upgrade_->settle_ms, phases.text());
  // From here the sockets are the new process's: nothing more is accepted or written here
  // unless it fails (then the listener comes back from its duplicate, the lines are written).
  upgrade_->listener = dup(fds[0]);
  server_.Abandon();
  server_.Mute(true);

  upgrade_->deadline->Start(kVerdictTimeoutMs, [this] {
    AbortUpgrade("the new process did not take over within " +
                 std::to_string(kVerdictTimeoutMs) + " ms");
  });
  uv_poll_start(upgrade_->poll, UV_READABLE, [](uv_poll_t* p, int, int) {
    static_cast<Agent*>(p->data)->OnChildMessage();
  });
}

void Agent::HandedOver() {
  spdlog::info("upgrade: pid {} took over {} session(s) and {} lock(s); this process exits "
               "leaving every lock to it", upgrade_->child_pid, server_.session_count(),
               engine_->locks_held());
  if (upgrade_->child != nullptr) {  // the new process lives on: its handle must not keep our loop
    uv_close(reinterpret_cast<uv_handle_t*>(upgrade_->child),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_process_t*>(h); });
    upgrade_->child = nullptr;
  }
  EndUpgradeHandles();
  if (upgrade_->listener >= 0) close(upgrade_->listener);
  upgrade_.reset();
  server_.DiscardMuted();
  shutting_down_ = true;
  handed_over_ = true;
  engine_->Shutdown([this] { Finish(); }, /*release=*/false);
}

void Agent::AbortUpgrade(const std::string& why) {
  if (!upgrade_) return;
  spdlog::error("upgrade failed: {}; this agent (pid {}) keeps serving", why, getpid());
  if (upgrade_->child != nullptr) {
    uv_process_kill(upgrade_->child, SIGKILL);
    upgrade_->child->data = nullptr;
  }
  EndUpgradeHandles();
  if (upgrade_->admin_stopped) {
    presence_.reset();
    admin_.reset();
    if (auto problem = StartAdmin()) spdlog::error("admin HTTP not restarted: {}", *problem);
  }
  if (upgrade_->listener >= 0) {
    if (auto problem = server_.AdoptListener(upgrade_->listener, *service_)) {
      spdlog::critical("the listening socket is lost: {}; connected clients are still served",
                       *problem);
    }
  }
  server_.Mute(false);
  if (upgrade_->held) server_.Hold(false);
  // Waiters dropped before the state was sent are still the sessions' asks.
  if (upgrade_->held && !upgrade_->sent) upgrade_->taken = service_->TakeAsks();
  service_->AskAgain(upgrade_->taken);
  if (upgrade_->requester != 0) {
    service_->AnswerUpgrade(upgrade_->requester, upgrade_->id,
                            Failure{ErrorCode::kUnavailable,
                                    "upgrade failed: " + why + "; this agent (pid " +
                                        std::to_string(getpid()) + ") keeps serving"});
  }
  upgrade_.reset();
}

void Agent::EndUpgradeHandles() {
  engine_->TrackChanges(nullptr);  // upgrade_ (which has the tracked set) is about to go
  if (upgrade_->deadline) upgrade_->deadline->Stop();
  if (upgrade_->precopy) upgrade_->precopy->Stop();
  if (upgrade_->settle) upgrade_->settle->Stop();
  if (upgrade_->poll != nullptr) {
    uv_poll_stop(upgrade_->poll);
    uv_close(reinterpret_cast<uv_handle_t*>(upgrade_->poll),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
    upgrade_->poll = nullptr;
  }
  if (upgrade_->channel >= 0) close(upgrade_->channel);
  upgrade_->channel = -1;
}

}  // namespace lw
