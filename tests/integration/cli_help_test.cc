// Each subcommand's --help lists the options it uses, and only those; what the parser says
// about a command line it refuses; what needs no agent to answer.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/agent_process.h"
#include "support/files.h"

namespace lw::test::cli_help {
namespace {

using ::testing::HasSubstr;

struct Ran {
  std::string output;  // stdout and stderr
  int exit_code = -1;
};

// `lockwarden ARGS` without the variables that say where the agent is (so the test's own
// environment does not decide), its output (stdout alone unless with_stderr) and exit code.
Ran RunLockwarden(const std::string& args, bool with_stderr = true) {
  Ran ran;
  const std::string command =
      "env -u LOCKWARDEN_SOCKET -u LOCKWARDEN_CONFIG -u LOCKWARDEN_SOCKET_PATH -u LOCKWARDEN_BINARY " +
      LockwardenBinary() + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null") +
      " </dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return ran;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) ran.output.append(buffer, n);
  const int status = pclose(pipe);
  ran.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return ran;
}

// True if help lists the option (followed by its value name, or by an alias after a comma).
bool Lists(const std::string& help, const std::string& option) {
  return help.find(option + " ") != std::string::npos ||
         help.find(option + ",") != std::string::npos;
}

TEST(CliHelpTest, ScanListsTheSettingsAScanReadsAndNoAgentOptions) {
  const Ran scan = RunLockwarden("scan --help");
  ASSERT_EQ(scan.exit_code, 0) << scan.output;
  for (const char* used : {"--config", "--master", "--key-prefix", "--fence-prefix", "--max-ttl-ms",
                           "--connect-timeout-ms", "--redis-user", "--redis-password-file",
                           "--scan-keys-per-second", "--scan-batch", "--scan-pattern", "--json"}) {
    EXPECT_TRUE(Lists(scan.output, used)) << used << " missing from:\n" << scan.output;
  }
  for (const char* agent_only :
       {"--socket", "--admin-listen", "--max-connections", "--idle-timeout-ms", "--access",
        "--node-timeout-ms", "--scan-interval-ms", "--log-level", "--check-config"}) {
    EXPECT_FALSE(Lists(scan.output, agent_only)) << agent_only << " listed in:\n" << scan.output;
  }
}

TEST(CliHelpTest, ServeListsEverySetting) {
  const Ran serve = RunLockwarden("serve --help");
  ASSERT_EQ(serve.exit_code, 0) << serve.output;
  for (const char* option : {"--socket", "--admin-listen", "--max-connections", "--access",
                             "--scan-interval-ms", "--scan-batch", "--master", "--check-config"}) {
    EXPECT_TRUE(Lists(serve.output, option)) << option << " missing from:\n" << serve.output;
  }
}

TEST(CliHelpTest, AnAgentOptionGivenToScanIsAUsageError) {
  const Ran scan = RunLockwarden("scan --master redis://127.0.0.1:1 --admin-listen off");
  EXPECT_EQ(scan.exit_code, 64) << scan.output;
  EXPECT_THAT(scan.output, HasSubstr("--admin-listen"));
}

TEST(CliHelpTest, WhoAndStatusFleetListTheAdminApiOptions) {
  for (const char* command : {"who --help", "status --help"}) {
    const Ran help = RunLockwarden(command);
    ASSERT_EQ(help.exit_code, 0) << help.output;
    for (const char* option : {"--admin", "--admin-token-file", "--config", "--json"}) {
      EXPECT_TRUE(Lists(help.output, option)) << option << " missing from:\n" << help.output;
    }
  }
  EXPECT_TRUE(Lists(RunLockwarden("status --help").output, "--fleet"));
}

TEST(CliHelpTest, WhoWithoutAReachableAgentExitsUnavailable) {
  const Ran who = RunLockwarden("who fleet:job --admin http://127.0.0.1:1");
  EXPECT_EQ(who.exit_code, 69) << who.output;
  EXPECT_THAT(who.output, HasSubstr("cannot reach the agent's admin API"));
}

// Runs `lockwarden ARGS`: expects exit_code, and each of `says` in its stdout and stderr.
void ExpectRun(const std::string& args, int exit_code, const std::vector<std::string>& says) {
  const Ran ran = RunLockwarden(args);
  EXPECT_EQ(ran.exit_code, exit_code) << args << ": " << ran.output;
  for (const std::string& text : says) EXPECT_THAT(ran.output, HasSubstr(text)) << args;
}

TEST(CliHelpTest, AnUnknownSubcommandIsNamedWithTheClosestOne) {
  ExpectRun("stauts", 64,
            {"unknown subcommand \"stauts\"; did you mean status?", "subcommands: serve, lock,",
             "Usage: lockwarden SUBCOMMAND"});
  ExpectRun("", 64, {"a subcommand is required", "Usage: lockwarden SUBCOMMAND"});
}

TEST(CliHelpTest, HelpDescribesLockwardenOrOneSubcommand) {
  ExpectRun("help", 0, {"\n  serve ", "\n  lock ", "\n  status ", "\n  upgrade ", "\n  help "});
  ExpectRun("help lock", 0, {"Usage: lockwarden lock [--ttl D]", "--kill-grace "});
  ExpectRun("help stauts", 64, {"unknown subcommand \"stauts\"; did you mean status?"});
}

TEST(CliHelpTest, AnUnknownOptionIsNamedWithTheSubcommandsUsage) {
  ExpectRun("lock --bogus x -- true", 64,
            {"lockwarden lock: unknown option --bogus\n", "Usage: lockwarden lock [--ttl D]",
             "`lockwarden help lock`"});
  ExpectRun("elect --value v --wiat 1s jobs -- true", 64,
            {"unknown option --wiat; did you mean --wait?", "Usage: lockwarden elect --value V"});
  ExpectRun("release r t surplus", 64, {"lockwarden release: unexpected argument surplus"});
}

TEST(CliHelpTest, LockAndElectNeedACommandAfterTheResourceOrName) {
  for (const char* args : {"lock x", "lock x --", "elect --value v jobs --"}) {
    ExpectRun(args, 64, {"CMD is required", "[--] CMD [ARGS...]"});
  }
  // An option of lockwarden's after the resource starts the command: refused, not run.
  ExpectRun("lock demo:x --ttl 5s -- true", 64,
            {"the command after RESOURCE starts with --ttl, an option"});
}

// The "Usage:" line(s) of `lockwarden help SUBCOMMAND`, without the label and indentation.
std::vector<std::string> UsageLinesOf(const std::string& help) {
  std::vector<std::string> lines;
  std::istringstream in(help);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Usage: ", 0) == 0) {
      inside = true;
      line = line.substr(7);
    } else if (!inside || line.empty()) {
      if (inside) break;
      continue;
    }
    lines.push_back(line.substr(line.find_first_not_of(' ')));
  }
  return lines;
}

TEST(CliHelpTest, TheDocsSynopsisShowsEveryUsageLine) {
  const std::string docs = lw::test::ReadFile(std::string(LOCKWARDEN_SOURCE_DIR) + "/docs/cli.md");
  ASSERT_FALSE(docs.empty());
  for (const char* sub : {"", "serve", "lock", "acquire", "extend", "release", "elect", "leader",
                          "status", "who", "upgrade", "scan", "help"}) {
    const Ran help = RunLockwarden(std::string("help ") + sub);
    ASSERT_EQ(help.exit_code, 0) << sub << ": " << help.output;
    const std::vector<std::string> usage = UsageLinesOf(help.output);
    ASSERT_FALSE(usage.empty()) << sub << ": " << help.output;
    for (const std::string& line : usage) {
      EXPECT_THAT(docs, HasSubstr("\n" + line + "\n")) << "docs/cli.md lacks: " << line;
    }
  }
}

TEST(CliHelpTest, StatusJsonWithoutAnAgentPrintsAJsonError) {
  const std::string socket = "/tmp/lockwarden-no-agent-here/agent.sock";
  const Ran ran = RunLockwarden("status --json --socket " + socket, /*with_stderr=*/false);
  EXPECT_EQ(ran.exit_code, 69) << ran.output;
  const nlohmann::json out = nlohmann::json::parse(ran.output, nullptr, false);
  ASSERT_TRUE(out.is_object()) << ran.output;
  EXPECT_EQ(out["ok"], false);
  EXPECT_EQ(out["error"], "unavailable");
  EXPECT_THAT(out.value("message", ""), HasSubstr(socket));
}

TEST(CliHelpTest, AConfigThatCannotBeReadIsAUsageErrorNamingIt) {
  const std::string missing = "/tmp/lockwarden-no-such-config.toml";
  ExpectRun("status --config " + missing, 64, {missing});
  const Ran json = RunLockwarden("status --json --config " + missing, /*with_stderr=*/false);
  EXPECT_EQ(json.exit_code, 64) << json.output;
  EXPECT_EQ(nlohmann::json::parse(json.output, nullptr, false).value("error", ""), "bad_request")
      << json.output;
}

}  // namespace
}  // namespace lw::test::cli_help
