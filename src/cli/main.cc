// lockwarden: a Redlock lock agent for the apps on this host. See README.md.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "cli/agent_config.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "config/config.h"
#include "core/build_commit.h"
#include "core/duration.h"
#include "core/lock_kind.h"

extern char** environ;

namespace {

// CLI11 validator for human durations such as 30s or 250ms.
struct DurationValidator : public CLI::Validator {
  DurationValidator() {
    name_ = "DURATION";
    func_ = [](std::string& text) -> std::string {
      auto parsed = lw::ParseDurationMs(text);
      if (auto* err = std::get_if<std::string>(&parsed)) return *err;
      return {};
    };
  }
};

int64_t Ms(const std::string& text) { return std::get<int64_t>(lw::ParseDurationMs(text)); }

std::map<std::string, std::string> Environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string::npos && kv.rfind("LOCKWARDEN_", 0) == 0) {
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  return env;
}

// The flags of the configuration settings one subcommand uses, and the sources they make. The
// file and the environment may hold every setting (one file serves serve and scan); only the
// flags are limited to what the subcommand reads.
class ConfigFlags {
 public:
  enum class Use { kServe, kScan };

  void AddTo(CLI::App* command, Use use) {
    command->add_option("--config", config_path_, "TOML configuration file (env LOCKWARDEN_CONFIG)");
    for (const auto& s : lw::Settings()) {
      if (use == Use::kScan && !s.used_by_scan) continue;
      const std::string flag = lw::FlagFor(s.key);
      if (s.repeatable) {
        command->add_option(flag, lists_[s.key], s.help + "; repeatable");
      } else if (s.key == "socket_path") {
        command->add_option("--socket," + flag, values_[s.key], s.help);
      } else {
        CLI::Option* option = command->add_option(flag, values_[s.key], s.help);
        if (s.refused_as_flag) option->group("");  // accepted only to be refused by LoadConfig
      }
    }
  }

  lw::ConfigSources Sources(CLI::App* command) const {
    lw::ConfigSources sources;
    sources.env = Environment();
    if (!config_path_.empty()) {
      sources.toml_path = config_path_;
    } else if (auto it = sources.env.find("LOCKWARDEN_CONFIG"); it != sources.env.end()) {
      sources.toml_path = it->second;
    }
    for (const auto& s : lw::Settings()) {
      const CLI::Option* option = command->get_option_no_throw(lw::FlagFor(s.key));
      if (option == nullptr || option->count() == 0) continue;
      sources.flags[s.key] = s.repeatable ? lists_.at(s.key)
                                          : std::vector<std::string>{values_.at(s.key)};
    }
    return sources;
  }

 private:
  std::string config_path_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> lists_;
};

// --socket and --config: where a client subcommand finds the agent (cli/agent_config.h). Without
// config, only --socket (the subcommand has its own --config).
void AddSocketOptions(CLI::App* command, lw::cli::SocketArgs& args, bool with_config = true) {
  command->add_option("--socket", args.socket,
                      "agent socket (default: env LOCKWARDEN_SOCKET, else socket_path of the "
                      "agent's --config, else /run/lockwarden/lockwarden.sock)");
  if (with_config) {
    command->add_option("--config", args.config_path,
                        "the agent's TOML configuration, for its socket_path (env "
                        "LOCKWARDEN_CONFIG)");
  }
}

// args resolved into *path (cli/agent_config.h); false when the agent's configuration cannot
// be read, said as ReportFailure says it (on stdout too with json).
bool SocketOf(const lw::cli::SocketArgs& args, std::string* path, bool json = false) {
  auto resolved = lw::cli::ResolveSocket(args);
  if (auto* error = std::get_if<std::string>(&resolved)) {
    lw::cli::ReportFailure(json, lw::ErrorCode::kBadRequest, *error, lw::cli::kExitUsage);
    return false;
  }
  *path = std::get<lw::cli::SocketPath>(resolved).path;
  return true;
}

// The options of the commands that ask the agent's admin HTTP API.
void AddAdminOptions(CLI::App* command, lw::cli::AdminArgs& args) {
  command->add_option("--admin", args.url,
                      "the agent's admin API, http://host:port (default: where the agent at "
                      "--socket says it is, else admin_listen of --config, else where the agent "
                      "at the default socket says, else http://127.0.0.1:9477)");
  command->add_option("--admin-token-file", args.token_file,
                      "file with the admin token, needed when the agent listens beyond loopback "
                      "(default: env LOCKWARDEN_ADMIN_TOKEN, else the config's admin_token_file)");
  command->add_option("--config", args.config_path,
                      "the agent's TOML configuration, for socket_path, admin_listen and "
                      "admin_token_file (env LOCKWARDEN_CONFIG)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lockwarden: distributed locks (Redlock over N Redis masters) for local apps",
               "lockwarden"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("lockwarden ") + LOCKWARDEN_VERSION + " (" +
                                        std::string(lw::BuildCommit()) + ")");

  // serve and scan: the settings they read are flags; flags override LOCKWARDEN_* env, which
  // overrides the file.
  ConfigFlags serve_flags, scan_flags;
  auto* serve = app.add_subcommand("serve", "Run the agent in the foreground");
  serve_flags.AddTo(serve, ConfigFlags::Use::kServe);
  bool serve_check_only = false;
  serve->add_flag("--check-config", serve_check_only,
                  "validate the configuration (file, env, flags, secret files, access rules), "
                  "print a summary and exit: 0 valid, 64 not; listens and connects to nothing");

  const DurationValidator duration;
  lw::cli::LockArgs lock_args;
  lw::cli::SocketArgs lock_socket;
  std::string ttl, wait = "30s", grace = "2s";
  auto* lock = app.add_subcommand(
      "lock", "Run a command while holding a lock (renewed while it runs), like flock(1)");
  lock->add_option("--ttl", ttl,
                   "lock time-to-live, renewed at ttl/3 (default: the agent's default_ttl_ms)")
      ->check(duration);
  lock->add_option("--wait", wait,
                   "how long to wait for the lock: while another holder has it, and while too "
                   "few masters are up for a quorum")
      ->check(duration)->capture_default_str();
  AddSocketOptions(lock, lock_socket);
  lock->add_option("--kill-grace", grace, "after a lost lock: SIGTERM, then SIGKILL after this")
      ->check(duration)->capture_default_str();
  lock->add_option("-E,--conflict-exit-code", lock_args.conflict_exit_code,
                   "exit code when the lock was not acquired within --wait")
      ->capture_default_str();
  lock->add_flag("-v,--verbose", lock_args.verbose, "say when the lock is acquired and released");
  lock->add_flag("--fence", lock_args.fence,
                 "also get a fencing token (strictly increasing per resource) and export it to "
                 "the command as LOCKWARDEN_FENCE; see docs/safety.md");
  lock->add_option("--permits", lock_args.permits,
                   "hold one permit of a semaphore of K (at most K holders at once, every holder "
                   "naming the same K); the command gets LOCKWARDEN_PERMIT (0..K-1)")
      ->check(CLI::Range(1, lw::kMaxPermits))
      ->type_name("K");
  lock->add_flag("--shared", lock_args.shared,
                 "hold a shared (read) hold: readers share, an exclusive (default) hold of the "
                 "resource excludes them");
  bool lock_all = false;
  lock->add_flag("--all", lock_all,
                 "the words before `--` are all resources, taken all or none (needed only when "
                 "the second one is also a command's name: `lock --all r git -- CMD`)");
  std::string lock_first;
  lw::cli::AddNameAndCommand(lock, "RESOURCE", "resource name; several: R1 R2... -- CMD",
                             &lock_first, &lock_args.command);

  // Detached leases: acquire prints the token; release and extend take it.
  lw::cli::LeaseArgs lease_args;
  lw::cli::SocketArgs lease_socket;
  std::string lease_ttl, lease_wait = "30s";
  bool detach = false;
  auto* acquire = app.add_subcommand(
      "acquire", "Take a detached lease and print its token: it outlives this command, and ends "
                 "when released by token (`lockwarden release`) or when its ttl runs out");
  acquire->add_flag("--detach", detach,
                    "required: the lease outlives this command (the only kind of acquire the "
                    "command line makes; to hold a lock while a command runs, use `lockwarden "
                    "lock`)")
      ->required();
  acquire->add_option("--ttl", lease_ttl,
                      "lease time-to-live, never renewed; keep it with `lockwarden extend` "
                      "(default: the agent's default_ttl_ms)")
      ->check(duration);
  acquire->add_option("--wait", lease_wait,
                      "how long to wait for the lock: while another holder has it, and while "
                      "too few masters are up for a quorum")
      ->check(duration)->capture_default_str();
  acquire->add_flag("--fence", lease_args.fence,
                    "also get a fencing token, printed after the token: \"TOKEN FENCE\"");
  acquire->add_option("-E,--conflict-exit-code", lease_args.conflict_exit_code,
                      "exit code when the lock was not acquired within --wait")
      ->capture_default_str();
  auto* release = app.add_subcommand(
      "release", "Release a detached lease by its token (from any process of its creator's uid)");
  auto* extend = app.add_subcommand(
      "extend", "Extend a detached lease by its token to --ttl from now; prints the validity "
                "in ms");
  extend->add_option("--ttl", lease_ttl, "the new time-to-live (default: the agent's "
                                         "default_ttl_ms)")
      ->check(duration);
  for (CLI::App* command : {acquire, release, extend}) {
    AddSocketOptions(command, lease_socket);
    command->add_flag("--json", lease_args.json, "print the agent's reply as JSON");
    command->add_option("RESOURCE", lease_args.resource, "resource name")->required();
  }
  for (CLI::App* command : {release, extend}) {
    command->add_option("TOKEN", lease_args.token, "the token `lockwarden acquire` printed")
        ->required();
  }

  lw::cli::ElectArgs elect_args;
  lw::cli::SocketArgs elect_socket;
  std::string elect_ttl, elect_wait, elect_grace = "2s";
  auto* elect = app.add_subcommand(
      "elect", "Run a command while leading an election: wait to lead, run it, stop it if the "
               "leadership is lost, resign when it exits");
  elect->add_option("--value", elect_args.value,
                    "what the leader announces to observers, e.g. host-a:8080 (1-1024 bytes)")
      ->required();
  elect->add_option("--ttl", elect_ttl,
                    "leadership time-to-live, renewed at ttl/3; a leader that dies is replaced "
                    "within about this long (default: the agent's default_ttl_ms)")
      ->check(duration);
  elect->add_option("--wait", elect_wait,
                    "give up when not leading after this long (exit 75, or -E; exit 69 when it "
                    "was too few masters up for a quorum); default: wait for as long as it "
                    "takes while another candidate leads")
      ->check(duration);
  AddSocketOptions(elect, elect_socket);
  elect->add_option("--kill-grace", elect_grace,
                    "after a lost leadership: SIGTERM, then SIGKILL after this")
      ->check(duration)->capture_default_str();
  elect->add_option("-E,--conflict-exit-code", elect_args.conflict_exit_code,
                    "exit code when not elected within --wait")
      ->capture_default_str();
  elect->add_flag("-v,--verbose", elect_args.verbose, "say when elected and when resigning");
  lw::cli::AddNameAndCommand(elect, "NAME", "election name", &elect_args.name,
                             &elect_args.command);

  std::string leader_name;
  lw::cli::SocketArgs leader_socket;
  bool leader_json = false, leader_watch = false;
  auto* leader = app.add_subcommand(
      "leader", "Who leads an election (value, agent, host, pid, term, since); exit 0 a leader, "
                "1 none, 69 unknown (agent or a quorum of masters unreachable)");
  leader->add_option("NAME", leader_name, "election name")->required();
  leader->add_flag("--json", leader_json, "machine-readable output (JSON lines with --watch)");
  leader->add_flag("--watch", leader_watch,
                   "print the leader, then one line at each change, until interrupted");
  AddSocketOptions(leader, leader_socket);

  std::string status_prefix;
  lw::cli::SocketArgs status_socket;
  bool status_json = false, status_fleet = false;
  lw::cli::AdminArgs status_admin;
  auto* status = app.add_subcommand("status", "Show masters, quorum and the agent's locks");
  AddSocketOptions(status, status_socket, /*with_config=*/false);
  status->add_flag("--json", status_json, "machine-readable output");
  status->add_flag("--fleet", status_fleet,
                   "every agent on the masters (settings drift flagged) and every lock held in "
                   "the fleet, from the agent's admin API; exit 69 if no quorum of masters was "
                   "read");
  status->add_option("--prefix", status_prefix, "with --fleet: only locks whose resource starts "
                                                "with this");
  AddAdminOptions(status, status_admin);

  std::string who_resource;
  bool who_json = false;
  lw::cli::AdminArgs who_admin;
  auto* who = app.add_subcommand(
      "who", "Who holds a lock anywhere in the fleet, since when, and who waits for it; exit 0 "
             "held, 1 not held, 69 unknown (agent or a quorum of masters unreachable)");
  who->add_option("RESOURCE", who_resource, "resource name")->required();
  who->add_flag("--json", who_json, "machine-readable output");
  who->add_option("--socket", who_admin.socket,
                  "the agent to ask, by its socket (default: env LOCKWARDEN_SOCKET): it says "
                  "where its admin API is");
  AddAdminOptions(who, who_admin);

  std::string upgrade_timeout = "60s";
  lw::cli::SocketArgs upgrade_socket;
  bool upgrade_json = false;
  auto* upgrade = app.add_subcommand(
      "upgrade", "Upgrade the running agent in place to the binary now at its path: its socket, "
                 "connections and locks are handed over, clients notice nothing; exit 0 "
                 "upgraded, 69 not (the old agent keeps serving)");
  AddSocketOptions(upgrade, upgrade_socket);
  upgrade->add_option("--timeout", upgrade_timeout, "how long to wait for the answer")
      ->check(duration)->capture_default_str();
  upgrade->add_flag("--json", upgrade_json, "print the new process's reply as JSON");

  bool scan_json = false;
  auto* scan = app.add_subcommand(
      "scan", "Scan the masters once for leaked lock keys; exit 1 if a key has no TTL");
  scan_flags.AddTo(scan, ConfigFlags::Use::kScan);
  scan->add_flag("--json", scan_json, "machine-readable output");

  std::string help_topic;
  CLI::App* help = lw::cli::AddHelpCommand(app, &help_topic);
  lw::cli::UseUsageLines(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return lw::cli::ParseFailed(app, e);
  }

  if (help->parsed()) return lw::cli::RunHelp(app, help_topic);
  if (serve->parsed()) return lw::cli::RunServe(serve_flags.Sources(serve), serve_check_only);
  if (scan->parsed()) return lw::cli::RunScan(scan_flags.Sources(scan), scan_json);
  if (lock->parsed()) {
    if (lock_args.permits > 0 && lock_args.shared) {
      return lw::cli::UsageError("lock", "--permits and --shared cannot go together: a "
                                         "semaphore has no shared holds. Use --permits K for a "
                                         "permit of a semaphore, or --shared for a read hold "
                                         "of a lock");
    }
    if (!lw::cli::ResourcesGiven(lock_first, lock_all, &lock_args.command,
                                 &lock_args.resources) ||
        !lw::cli::CommandGiven("lock", "RESOURCE", &lock_args.command)) {
      return lw::cli::kExitUsage;
    }
    if (!SocketOf(lock_socket, &lock_args.socket_path)) return lw::cli::kExitUsage;
    lock_args.ttl_ms = ttl.empty() ? 0 : Ms(ttl);
    lock_args.wait_ms = Ms(wait);
    lock_args.kill_grace_ms = Ms(grace);
    return lw::cli::RunLock(lock_args);
  }
  if (acquire->parsed() || release->parsed() || extend->parsed()) {
    if (!SocketOf(lease_socket, &lease_args.socket_path)) return lw::cli::kExitUsage;
    lease_args.ttl_ms = lease_ttl.empty() ? 0 : Ms(lease_ttl);
    lease_args.wait_ms = Ms(lease_wait);
    if (acquire->parsed()) return lw::cli::RunAcquireDetached(lease_args);
    if (release->parsed()) return lw::cli::RunRelease(lease_args);
    return lw::cli::RunExtend(lease_args);
  }
  if (elect->parsed()) {
    if (!lw::cli::CommandGiven("elect", "NAME", &elect_args.command)) return lw::cli::kExitUsage;
    if (!SocketOf(elect_socket, &elect_args.socket_path)) return lw::cli::kExitUsage;
    elect_args.ttl_ms = elect_ttl.empty() ? 0 : Ms(elect_ttl);
    elect_args.wait_ms = elect_wait.empty() ? -1 : Ms(elect_wait);
    elect_args.kill_grace_ms = Ms(elect_grace);
    return lw::cli::RunElect(elect_args);
  }
  if (leader->parsed()) {
    std::string socket;
    if (!SocketOf(leader_socket, &socket)) return lw::cli::kExitUsage;
    return lw::cli::RunLeader(socket, leader_name, leader_json, leader_watch);
  }
  if (upgrade->parsed()) {
    std::string socket;
    if (!SocketOf(upgrade_socket, &socket, upgrade_json)) return lw::cli::kExitUsage;
    return lw::cli::RunUpgrade(socket, Ms(upgrade_timeout), upgrade_json);
  }
  if (who->parsed()) return lw::cli::RunWho(who_admin, who_resource, who_json);
  if (status_fleet) {
    status_admin.socket = status_socket.socket;  // the agent at --socket says where its API is
    return lw::cli::RunFleetStatus(status_admin, status_prefix, status_json);
  }
  status_socket.config_path = status_admin.config_path;
  std::string socket;
  if (!SocketOf(status_socket, &socket, status_json)) return lw::cli::kExitUsage;
  return lw::cli::RunStatus(socket, status_json);
}
