#pragma once
// A command run under a hold (`lockwarden lock`, `lockwarden elect`): the child leads its own
// process group, the signals the CLI gets are passed on to that group, and when the agent says
// the hold was lost (or the connection to it goes) the group gets SIGTERM, then SIGKILL after a
// grace.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/client.h"

namespace lw::cli {

// Passes SIGINT, SIGTERM, SIGHUP and SIGQUIT on to the child (Supervise). Call before Spawn.
void InstallForwarding();

// The child's environment changes: a value sets the variable, nullopt removes it (never pass an
// outer hold's variable on as this one's).
using EnvChanges = std::vector<std::pair<std::string, std::optional<std::string>>>;

// Forks and execs `command` (looked up in PATH) in a process group of its own; -1 when fork
// fails. A command that cannot be run exits 127 after saying why.
pid_t SpawnCommand(const std::vector<std::string>& command, const EnvChanges& env);

// What is left now of a grant's validity: it counts from before its request was sent (at
// `asked`), less the wait the reply reports.
int64_t ValidMsLeft(const nlohmann::json& grant, std::chrono::steady_clock::time_point asked);

// How Supervise keeps a hold through a restart of the agent (docs/cli.md "Restarts"): it
// learns how long the hold is valid (`held`, every HoldWatch::refresh_ms), and when the
// connection goes it connects again and resumes the hold, until that validity ends.
struct Resumer {
  std::string token;
  int64_t valid_ms = 0;  // the grant's validity, counted from before its request was sent
  // Sends the resume on a new connection; its reply.
  std::function<nlohmann::json(client::Client&)> resume;
};

// One hold Supervise watches: a `lost` event naming `resource` ends the command.
struct WatchedHold {
  std::string resource;
  std::optional<Resumer> resumer;  // none: the hold is lost with the connection
};

// What Supervise stops the child for: a `lost` event of any of `holds` (held together: the
// command runs while it has all of them), or the connection's end when they cannot all be
// resumed on a new one before one's validity ends.
struct HoldWatch {
  std::vector<WatchedHold> holds;
  std::string described;  // for the message: `lock "x"`, `locks "x", "y"`, `leadership of "x"`
  int64_t kill_grace_ms = 2'000;
  std::string socket_path;  // where a resume connects
  int64_t refresh_ms = 0;   // how often the validity is read again while connected
};

// Watches the child, the agent connection and forwarded signals until the child exits. Returns
// its wait status; sets *lost when the hold was lost meanwhile (and the child was stopped). c
// is the connection the hold lives on, replaced when it is resumed on a new one.
int Supervise(std::optional<client::Client>& c, pid_t child, const HoldWatch& hold, bool* lost);

// After the command: gives the hold back with `send` (a release, a resign), saying on stderr
// when that fails ("<op> of <what>: ..."; it then ends with its ttl) and, when verbose, when it
// is done ("<done> <what>").
struct GiveBackWords {
  std::string op;    // "release", "resign"
  std::string done;  // "released", "resigned from"
  std::string what;  // "\"x\""
  std::string ends;  // "the lock", "the leadership"
};
void GiveBack(const GiveBackWords& words, bool verbose,
              const std::function<nlohmann::json()>& send);

// A wait status as an exit code: the code, or 128 + the signal.
int ExitCodeOf(int status);

// The exit code for an acquire or campaign refused with `reply`, said on stderr as
// "could not <doing>: <code>: <message>". conflict_exit_code for timeout.
int RefusalExit(const std::string& doing, const nlohmann::json& reply, int conflict_exit_code);

}  // namespace lw::cli
