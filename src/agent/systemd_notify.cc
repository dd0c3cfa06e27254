#include "agent/systemd_notify.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace lw {
namespace {

// The STATUS line's counts: usable first, as `systemctl status` readers look for them.
std::string MasterCounts(const Snapshot& s) {
  const int quarantined = s.masters_up - s.masters_usable;
  std::string text = std::to_string(s.masters_usable) + " of " + std::to_string(s.masters.size()) +
                     " masters usable (quorum " + std::to_string(s.quorum);
  if (s.masters_up < static_cast<int>(s.masters.size())) {
    text += ", " + std::to_string(static_cast<int>(s.masters.size()) - s.masters_up) + " down";
  }
  if (quarantined > 0) text += ", " + std::to_string(quarantined) + " in restart quarantine";
  return text + ")";
}

// One line for `systemctl status`. Before the first READY=1 it says what the agent waits for;
// after it, whether locks can be granted and how much is going on.
std::string StatusLine(const Snapshot& s, bool ready, bool was_ready) {
  if (!ready) {
    return (was_ready ? "QUORUM LOST, no lock can be granted: " : "waiting for a quorum: ") +
           MasterCounts(s);
  }
  return "ready: " + MasterCounts(s) + "; " + std::to_string(s.locks_held) + " lock(s) held, " +
         std::to_string(s.sessions) + " session(s)";
}

}  // namespace

SystemdNotifier::SystemdNotifier(uv_loop_t* loop) : loop_(loop) {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && *socket != '\0';
}

void SystemdNotifier::Start(std::string_view socket_path) {
  if (!enabled_ || started_) return;
  started_ = true;
  Send("STATUS=listening on " + std::string(socket_path) + ", connecting to the masters");

  uint64_t usec = 0;
  // 0: keep WATCHDOG_USEC/WATCHDOG_PID in the environment (nothing else reads them; the agent
  // starts no children). > 0 only when systemd set them for this very process.
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    // Half the interval, as sd_watchdog_enabled(3) advises: one late tick is not yet a miss.
    const int64_t period_ms = std::max<int64_t>(1, static_cast<int64_t>(usec / 2000));
    watchdog_ = std::make_unique<Timer>(loop_);
    Send("WATCHDOG=1");
    watchdog_->StartRepeat(period_ms, [this] { Send("WATCHDOG=1"); });
    spdlog::info("systemd: watchdog every {} ms (WatchdogSec {} ms)", period_ms, usec / 1000);
  }
}

void SystemdNotifier::Observe(const Snapshot& snapshot) {
  if (!enabled_ || !started_ || stopping_) return;
  const bool ready = ReadinessOf(snapshot).ready;
  std::string status = StatusLine(snapshot, ready, ready_sent_);
  std::string message;
  if (!ready_sent_ && ready) {
    ready_sent_ = true;
    message = "READY=1\n";
    spdlog::info("systemd: ready ({})", MasterCounts(snapshot));
  }
  if (status != last_status_) {
    message += "STATUS=" + status;
    last_status_ = std::move(status);
  }
  if (!message.empty()) Send(message);
}

void SystemdNotifier::Stopping(const std::string& status) {
  if (!enabled_ || stopping_) return;
  stopping_ = true;
  Send("STOPPING=1\nSTATUS=shutting down: " + status);
}

void SystemdNotifier::Stop() {
  if (watchdog_) watchdog_->Stop();
}

void SystemdNotifier::Send(const std::string& state) {
  const int rc = sd_notify(0, state.c_str());
  if (rc < 0 && !failure_logged_) {
    failure_logged_ = true;
    const char* socket = std::getenv("NOTIFY_SOCKET");
    spdlog::warn(
        "systemd: sd_notify failed: {} (NOTIFY_SOCKET={}); further failures are not "
        "logged",
        std::strerror(-rc), socket ? socket : "");
  }
}

}  // namespace lw
