// Each subcommand's --help lists the options it uses, and only those.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace lw::test::cli_help {
namespace {

using ::testing::HasSubstr;

struct Ran {
  std::string output;  // stdout and stderr
  int exit_code = -1;
};

Ran RunLockwarden(const std::string& args) {
  Ran ran;
  const std::string command = std::string(LOCKWARDEN_BINARY) + " " + args + " 2>&1 </dev/null";
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

}  // namespace
}  // namespace lw::test::cli_help
