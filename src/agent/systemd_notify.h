#pragma once
// SystemdNotifier: the agent's side of a systemd `Type=notify` service (deploy/systemd/).
//
//   READY=1     once the socket listens and a quorum of masters is usable (ReadinessOf,
//               as /readyz), so units ordered After=lockwarden.service start when locks can be had;
//   STATUS=...  what `systemctl status` shows: waiting for which masters, or how many are
//               usable and how many locks are held, whenever that changes;
//   WATCHDOG=1  every half WatchdogSec, from a timer on the event loop: a loop that is stuck
//               stops feeding it and systemd kills and restarts the agent;
//   STOPPING=1  when SIGTERM/SIGINT begins the shutdown.
//
// Started by anything but systemd (no NOTIFY_SOCKET in the environment) every call does
// nothing. Loop thread only.

#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "observe/snapshot.h"
#include "redis/timer.h"

namespace lw {

class SystemdNotifier {
 public:
  explicit SystemdNotifier(uv_loop_t* loop);
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

  // Call once the agent serves (socket listening, admin up, signals handled): says so in
  // STATUS, and starts feeding the watchdog when systemd asked for one (WATCHDOG_USEC).
  void Start(std::string_view socket_path);
  // Each published snapshot: READY=1 the first time a quorum of masters is usable (only after
  // Start), STATUS= when the summary line changes.
  void Observe(const Snapshot& snapshot);
  // SIGTERM/SIGINT: STOPPING=1 with `status` ("releasing 3 lock(s)"). The watchdog keeps being
  // fed until Stop.
  void Stopping(const std::string& status);
  // The loop is about to run dry: stop the watchdog timer (it would keep the loop alive).
  void Stop();
  // An in-place upgrade's new process: it is the service's main process now (NotifyAccess=all).
  void MainPid(int pid) { Send("MAINPID=" + std::to_string(pid)); }

  bool enabled() const { return enabled_; }

 private:
  // sd_notify(state); logs the first failure (systemd gone, socket unwritable) once.
  void Send(const std::string& state);

  bool enabled_ = false;  // NOTIFY_SOCKET was set when the agent started
  bool started_ = false;
  bool ready_sent_ = false;
  bool stopping_ = false;
  bool failure_logged_ = false;
  std::string last_status_;
  std::unique_ptr<Timer> watchdog_;  // only when systemd asked for a watchdog
  uv_loop_t* loop_;
};

}  // namespace lw
