// lockwarden: a Redlock lock agent for the apps on this host. See README.md.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "cli/commands.h"
#include "client/client.h"
#include "config/config.h"
#include "core/duration.h"

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lockwarden: distributed locks (Redlock over N Redis masters) for local apps"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("lockwarden ") + LOCKWARDEN_VERSION + " (" +
                                        LOCKWARDEN_GIT_COMMIT + ")");

  // serve: every setting is a flag; flags override LOCKWARDEN_* env, which overrides the file.
  auto* serve = app.add_subcommand("serve", "Run the agent in the foreground");
  std::string config_path;
  serve->add_option("--config", config_path, "TOML configuration file (env LOCKWARDEN_CONFIG)");
  std::map<std::string, std::string> values;
  std::vector<std::string> masters;
  for (const auto& s : lw::Settings()) {
    if (s.key == "masters") {
      serve->add_option("--master", masters, s.help)->type_name("URL");
    } else if (s.key == "socket_path") {
      serve->add_option("--socket," + lw::FlagFor(s.key), values[s.key], s.help);
    } else {
      serve->add_option(lw::FlagFor(s.key), values[s.key], s.help);
    }
  }

  const DurationValidator duration;
  lw::cli::LockArgs lock_args;
  std::string ttl = "30s", wait = "30s", grace = "2s";
  auto* lock = app.add_subcommand(
      "lock", "Run a command while holding a lock (renewed while it runs), like flock(1)");
  lock->add_option("--ttl", ttl, "lock time-to-live, renewed at ttl/3")
      ->check(duration)->capture_default_str();
  lock->add_option("--wait", wait, "how long to wait for the lock")
      ->check(duration)->capture_default_str();
  lock->add_option("--socket", lock_args.socket_path, "agent socket (env LOCKWARDEN_SOCKET)");
  lock->add_option("--kill-grace", grace, "after a lost lock: SIGTERM, then SIGKILL after this")
      ->check(duration)->capture_default_str();
  lock->add_option("-E,--conflict-exit-code", lock_args.conflict_exit_code,
                   "exit code when the lock was not acquired within --wait")
      ->capture_default_str();
  lock->add_flag("-v,--verbose", lock_args.verbose, "say when the lock is acquired and released");
  lock->add_option("resource", lock_args.resource, "resource name")->required();
  lock->add_option("command", lock_args.command, "command and arguments (after --)")->required();

  std::string status_socket;
  bool status_json = false;
  auto* status = app.add_subcommand("status", "Show masters, quorum and the agent's locks");
  status->add_option("--socket", status_socket, "agent socket (env LOCKWARDEN_SOCKET)");
  status->add_flag("--json", status_json, "machine-readable output");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : lw::cli::kExitUsage;
  }

  if (serve->parsed()) {
    lw::ConfigSources sources;
    sources.env = Environment();
    if (!config_path.empty()) {
      sources.toml_path = config_path;
    } else if (auto it = sources.env.find("LOCKWARDEN_CONFIG"); it != sources.env.end()) {
      sources.toml_path = it->second;
    }
    if (!masters.empty()) sources.flags["masters"] = masters;
    for (const auto& s : lw::Settings()) {
      if (s.key != "masters" && serve->get_option(lw::FlagFor(s.key))->count() > 0) {
        sources.flags[s.key] = {values[s.key]};
      }
    }
    return lw::cli::RunServe(sources);
  }
  if (lock->parsed()) {
    if (lock_args.socket_path.empty()) lock_args.socket_path = lw::client::DefaultSocketPath();
    lock_args.ttl_ms = Ms(ttl);
    lock_args.wait_ms = Ms(wait);
    lock_args.kill_grace_ms = Ms(grace);
    return lw::cli::RunLock(lock_args);
  }
  if (status_socket.empty()) status_socket = lw::client::DefaultSocketPath();
  return lw::cli::RunStatus(status_socket, status_json);
}
