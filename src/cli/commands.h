#pragma once
// The lockwarden subcommands. Each returns the process exit code.

#include <cstdint>
#include <string>
#include <vector>

#include "cli/admin_client.h"
#include "config/config.h"
#include "core/error_code.h"

namespace lw::cli {

// Exit codes of `lockwarden lock` (see docs/cli.md). The command's own code passes through.
// `acquire`, `release` and `extend` exit with the same codes.
inline constexpr int kExitUsage = 64;        // bad arguments, or the agent refused the request
inline constexpr int kExitUnavailable = 69;  // agent unreachable, or no quorum of masters
inline constexpr int kExitLost = 72;         // the lock was lost; the command was terminated
inline constexpr int kExitNotAcquired = 75;  // held by someone else for all of --wait

// check_only (`serve --check-config`): load and validate everything serve would (settings,
// secret files, socket owner/group, access rules), print a summary, and exit 0 or 64 without
// listening or connecting to anything.
int RunServe(const ConfigSources& sources, bool check_only = false);

struct LockArgs {
  std::string socket_path;
  std::vector<std::string> resources;  // one, or several taken all or none
  int64_t ttl_ms = 0;  // 0: the agent's default_ttl_ms
  int64_t wait_ms = 30'000;
  int64_t kill_grace_ms = 2'000;
  int conflict_exit_code = kExitNotAcquired;
  bool verbose = false;
  bool fence = false;  // ask for a fencing token and export it as LOCKWARDEN_FENCE
  int permits = 0;      // > 0: hold a permit of a semaphore of this many (LOCKWARDEN_PERMIT)
  bool shared = false;  // hold a read (shared) hold instead of the exclusive one
  std::vector<std::string> command;
};
int RunLock(const LockArgs& args);

// The exit code of an error reply (its "error" code) of the agent, as `lock` exits on it:
// timeout -> conflict_exit_code, not_held -> kExitLost, a refusal -> kExitUsage, the rest
// (no_quorum, shutting_down, ...) -> kExitUnavailable.
int ExitCodeOfError(const std::string& code, int conflict_exit_code = kExitNotAcquired);

// `lockwarden acquire --detach`, `release` and `extend`: a detached lease, kept and ended by
// token from any process of its creator's uid (docs/cli.md).
struct LeaseArgs {
  std::string socket_path;
  std::string resource;
  std::string token;    // release, extend
  int64_t ttl_ms = 0;   // acquire, extend; 0: the agent's default_ttl_ms
  int64_t wait_ms = 30'000;  // acquire
  int conflict_exit_code = kExitNotAcquired;  // acquire
  bool fence = false;   // acquire
  bool json = false;    // print the agent's reply as JSON
};
int RunAcquireDetached(const LeaseArgs& args);
int RunRelease(const LeaseArgs& args);
int RunExtend(const LeaseArgs& args);
// `lockwarden elect --value V NAME [--] CMD...`: campaign, run the command while leading, stop it
// as `lock` does when the leadership is lost, resign when it exits. Exit codes as `lock`'s.
struct ElectArgs {
  std::string socket_path;
  std::string name;
  std::string value;
  int64_t ttl_ms = 0;    // 0: the agent's default_ttl_ms
  int64_t wait_ms = -1;  // < 0: campaign again each time the agent's max_wait_ms runs out
  int64_t kill_grace_ms = 2'000;
  int conflict_exit_code = kExitNotAcquired;
  bool verbose = false;
  std::vector<std::string> command;
};
int RunElect(const ElectArgs& args);

// `lockwarden upgrade`: the agent on socket_path upgrades in place (docs/upgrade.md); 0 when
// the new process answered, kExitUnavailable when not (the old one keeps serving).
int RunUpgrade(const std::string& socket_path, int64_t timeout_ms, bool json);

// Exit codes of `lockwarden leader`: a leader, none; kExitUnavailable when the agent or a
// quorum of masters could not tell, kExitUsage for a bad name.
inline constexpr int kExitLeader = 0;
inline constexpr int kExitNoLeader = 1;
// watch: print the leader, then each change, until the connection ends (exit 69).
int RunLeader(const std::string& socket_path, const std::string& name, bool json, bool watch);

// Exit 0 when a quorum of masters is usable, kExitUnavailable when not or when the agent does
// not answer (with json: a JSON error object on stdout, as ReportFailure).
int RunStatus(const std::string& socket_path, bool json);

// A failure before the agent answered: with json, {"ok":false,"error":<code>,"message":...} on
// stdout (the shape of the agent's own errors); the message on stderr in any case. Returns
// exit_code.
int ReportFailure(bool json, ErrorCode code, const std::string& message, int exit_code);

// `status --fleet`: every agent (drift flagged) and the fleet lock table, from the local agent's
// admin API. 0: a quorum of masters was read; kExitUnavailable: not, or no answer.
int RunFleetStatus(const AdminArgs& admin, const std::string& prefix, bool json);

// Exit codes of `lockwarden who`: held, not held; kExitUnavailable when the agent, its fleet
// view or a quorum of masters could not tell, kExitUsage for a bad resource name.
inline constexpr int kExitHeld = 0;
inline constexpr int kExitNotHeld = 1;
int RunWho(const AdminArgs& admin, const std::string& resource, bool json);

// One leak-scan pass; 0 clean, 1 keys without TTL found, kExitUnavailable a master failed.
int RunScan(const ConfigSources& sources, bool json);

}  // namespace lw::cli
