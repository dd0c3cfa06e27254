// Redis credentials (merged into each master whose URL has none), password files, and TOML
// files that hold a password.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>

#include "config/config.h"
#include "unit/config_fixture.h"

namespace lw::config_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Redis credentials: merged into each master whose URL has none.

constexpr char kPasswordFlag[] = "hunter2-on-the-command-line";

TEST(ConfigCredentials, UrlCredentialsWinAndTheOthersGetTheAgentWideOnes) {
  ConfigSources sources;
  sources.flags["masters"] = {"redis://owner:url-pw@a:1", "redis://b:2", "redis://:url-only@c:3"};
  sources.flags["redis_user"] = {"lockwarden"};
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "env-pw";
  const Config c = MustLoad(sources);
  ASSERT_EQ(c.masters.size(), 3u);
  EXPECT_EQ(c.masters[0].user, "owner");
  EXPECT_EQ(c.masters[0].password, "url-pw");
  EXPECT_EQ(c.masters[1].user, "lockwarden");
  EXPECT_EQ(c.masters[1].password, "env-pw");
  EXPECT_EQ(c.masters[2].user, "") << "a URL with a password alone keeps AUTH <password>";
  EXPECT_EQ(c.masters[2].password, "url-only");
  EXPECT_EQ(c.redis_password, "env-pw");
}

TEST(ConfigCredentials, APasswordWithoutUserIsAuthWithThePasswordOnly) {
  ConfigSources sources;
  sources.flags["masters"] = {"redis://a:1", "redis://b:2"};
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "env-pw";
  const Config c = MustLoad(sources);
  for (const MasterAddress& m : c.masters) {
    EXPECT_EQ(m.user, "");
    EXPECT_EQ(m.password, "env-pw");
  }
}

TEST(ConfigCredentials, NoCredentialsLeavesMastersAlone) {
  const Config c = MustLoad(WithMasterFlag());
  EXPECT_EQ(c.masters[0].user, "");
  EXPECT_EQ(c.masters[0].password, "");
  ConfigSources sources = WithMasterFlag();
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "";  // set but empty: no AUTH
  EXPECT_EQ(MustLoad(sources).masters[0].password, "");
}

TEST(ConfigCredentials, AUserWithoutAPasswordIsRefused) {
  ConfigSources sources = WithMasterFlag();
  sources.flags["redis_user"] = {"lockwarden"};
  EXPECT_EQ(LoadError(sources),
            "redis_user (flag --redis-user): an ACL user needs a password: set "
            "redis_password_file or LOCKWARDEN_REDIS_PASSWORD");
  sources.flags.erase("redis_user");
  sources.env["LOCKWARDEN_REDIS_USER"] = "lockwarden";
  EXPECT_THAT(LoadError(sources), StartsWith("redis_user (env LOCKWARDEN_REDIS_USER): "));
}

TEST(ConfigCredentials, ThePasswordFlagIsRefusedWithoutEchoingIt) {
  ConfigSources sources = WithMasterFlag();
  sources.flags["redis_password"] = {kPasswordFlag};
  const std::string error = LoadError(sources);
  EXPECT_THAT(error, StartsWith("redis_password (flag --redis-password): a password on the "
                                "command line is visible to every user of the host"));
  EXPECT_THAT(error, HasSubstr("use LOCKWARDEN_REDIS_PASSWORD or redis_password_file"));
  EXPECT_THAT(error, Not(HasSubstr(kPasswordFlag)));
  EXPECT_EQ(FlagFor("redis_password"), "--redis-password");
  for (const SettingInfo& s : Settings()) {
    if (s.key == "redis_password") {
      EXPECT_THAT(s.help, HasSubstr("never a flag"));
    }
  }
}

TEST(ConfigCredentials, TheEnvironmentPasswordIsUsed) {
  ConfigSources sources = WithMasterFlag();
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "p@ss word:with/odd,chars";
  const Config c = MustLoad(sources);
  EXPECT_EQ(c.masters[0].password, "p@ss word:with/odd,chars") << "taken whole, never split";
}

TEST(ConfigCredentials, ALineBreakInThePasswordIsRefusedWithoutEchoingIt) {
  ConfigSources sources = WithMasterFlag();
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "first-half-secret\nsecond";
  const std::string error = LoadError(sources);
  EXPECT_EQ(error, "redis_password (env LOCKWARDEN_REDIS_PASSWORD): must not contain a line break");
}

TEST_F(ConfigFileTest, PasswordFileGivesItsFirstLineWithoutTheLineEnding) {
  struct Case {
    std::string contents;
    std::string password;
  };
  const std::vector<Case> cases = {
      {"s3cret\n", "s3cret"},
      {"s3cret", "s3cret"},
      {"s3cret\r\n", "s3cret"},
      {"s3cret\r\nsecond line\n", "s3cret"},
      {"with blanks inside \n", "with blanks inside "},
      {std::string(5000, 'x') + "\n", std::string(5000, 'x')},
  };
  for (const Case& c : cases) {
    ConfigSources sources = WithMasterFlag();
    sources.flags["redis_password_file"] = {Write("redis.pw", c.contents, k0600)};
    const Config config = MustLoad(sources);
    const std::string& got = config.masters[0].password;
    EXPECT_TRUE(got == c.password) << "got " << got.size() << " bytes \"" << got.substr(0, 40)
                                   << "\", want " << c.password.size() << " bytes";
    EXPECT_EQ(config.masters[0].user, "");
  }
  ConfigSources sources = WithMasterFlag();
  sources.env["LOCKWARDEN_REDIS_PASSWORD_FILE"] = Write("group.pw", "grp\n", k0640);
  sources.env["LOCKWARDEN_REDIS_USER"] = "lockwarden";
  const Config config = MustLoad(sources);
  EXPECT_EQ(config.masters[0].password, "grp") << "0640 is fine";
  EXPECT_EQ(config.masters[0].user, "lockwarden");
  EXPECT_EQ(ValidateConfig(config), std::nullopt) << "a loaded config validates again";
}

TEST_F(ConfigFileTest, PasswordFileRefusals) {
  ConfigSources sources = WithMasterFlag();
  auto error_for = [&](const std::string& path) {
    sources.flags["redis_password_file"] = {path};
    return LoadError(sources);
  };
  const std::string readable = Write("readable.pw", "world-readable-secret\n", k0644);
  EXPECT_EQ(error_for(readable), "redis_password_file (flag --redis-password-file): " + readable +
                                     " may be read by every user of the host; chmod o-r it "
                                     "(e.g. 0640)");
  const std::string empty = Write("empty.pw", "", k0600);
  EXPECT_EQ(error_for(empty), "redis_password_file (flag --redis-password-file): " + empty +
                                  ": the first line is empty");
  EXPECT_THAT(error_for(Write("blank-first.pw", "\nsecond-line-secret\n", k0600)),
              HasSubstr("the first line is empty"));
  EXPECT_THAT(error_for(Write("crlf-only.pw", "\r\n", k0600)),
              HasSubstr("the first line is empty"));
  const std::string missing = (dir_ / "missing.pw").string();
  EXPECT_EQ(error_for(missing), "redis_password_file (flag --redis-password-file): cannot read " +
                                    missing + ": No such file or directory");
  EXPECT_THAT(error_for(dir_.string()), HasSubstr(dir_.string() + " is not a regular file"));
  EXPECT_THAT(error_for("relative/redis.pw"),
              StartsWith("redis_password_file (flag --redis-password-file): must be an absolute"));
  // Given both ways: refused, whatever the sources.
  sources.flags["redis_password_file"] = {Write("ok.pw", "file-secret\n", k0600)};
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "env-secret";
  const std::string both = LoadError(sources);
  EXPECT_THAT(both, StartsWith("redis_password_file (flag --redis-password-file): and "
                               "redis_password are both set; give one"));
  EXPECT_THAT(both, Not(HasSubstr("env-secret")));
  EXPECT_THAT(both, Not(HasSubstr("file-secret")));
}

TEST_F(ConfigFileTest, PasswordFileErrorsNeverShowItsContents) {
  ConfigSources sources = WithMasterFlag();
  sources.flags["redis_password_file"] = {Write("readable.pw", "do-not-show-me\n", k0644)};
  EXPECT_THAT(LoadError(sources), Not(HasSubstr("do-not-show-me")));
}

// ---------------------------------------------------------------------------------------------
// A TOML file holding a password must not be readable by every user.

TEST_F(ConfigFileTest, WorldReadableTomlWithAPasswordIsRefused) {
  const std::vector<std::string> secret_files = {
      "masters = [\"redis://10.0.0.1:6379\", \"redis://:url-secret@10.0.0.2:6379\"]\n",
      "masters = [\"redis://10.0.0.1:6379\"]\nredis_password = \"toml-secret\"\n",
      "masters = [\"redis://alice:url-secret@10.0.0.1:6379\"]\n",
  };
  for (const std::string& contents : secret_files) {
    ConfigSources sources;
    sources.toml_path = Write("lockwarden.toml", contents, k0644);
    const std::string error = LoadError(sources);
    EXPECT_EQ(error, "config file " + *sources.toml_path +
                         " holds a Redis password and may be read by every user of the host; "
                         "chmod o-r it (e.g. 0640)")
        << contents;
    EXPECT_THAT(error, Not(HasSubstr("secret@"))) << contents;
    EXPECT_THAT(error, Not(HasSubstr("toml-secret"))) << contents;
    for (auto mode : {k0640, k0600}) {
      sources.toml_path = Write("lockwarden.toml", contents, mode);
      EXPECT_FALSE(MustLoad(sources).masters.empty()) << contents;
    }
  }
}

TEST_F(ConfigFileTest, WorldReadableTomlWithoutAPasswordIsFine) {
  ConfigSources sources;
  sources.toml_path = Write("lockwarden.toml",
                            "masters = [\"redis://10.0.0.1:6379\"]\nredis_user = \"lockwarden\"\n"
                            "redis_password_file = \"" +
                                Write("redis.pw", "pw\n", k0600) + "\"\n",
                            k0644);
  const Config c = MustLoad(sources);
  EXPECT_EQ(c.masters[0].user, "lockwarden");
  EXPECT_EQ(c.masters[0].password, "pw");
  sources.toml_path = Write("plain.toml", "masters = [\"redis://10.0.0.1:6379\"]\n", k0644);
  EXPECT_EQ(MustLoad(sources).masters.size(), 1u);
  sources.toml_path =
      Write("empty-pw.toml", "masters = [\"redis://h:1\"]\nredis_password = \"\"\n", k0644);
  EXPECT_EQ(MustLoad(sources).masters[0].password, "");
}

// The file is readable whatever overrides its values: a password in it is exposed all the same.
TEST_F(ConfigFileTest, WorldReadableTomlWithAPasswordIsRefusedEvenWhenOverridden) {
  ConfigSources sources;
  sources.toml_path = Write("lockwarden.toml",
                            "masters = [\"redis://:url-secret@10.0.0.2:6379\"]\n"
                            "redis_password = \"toml-secret\"\n",
                            k0644);
  sources.env["LOCKWARDEN_MASTERS"] = "redis://10.0.0.3:6379";
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "env-secret";
  EXPECT_THAT(LoadError(sources), HasSubstr("holds a Redis password"));
}

TEST_F(ConfigFileTest, TomlPasswordIsAppliedLikeTheEnvironmentOne) {
  ConfigSources sources;
  sources.toml_path = Write("lockwarden.toml",
                            "masters = [\"redis://a:1\", \"redis://u:own@b:2\"]\n"
                            "redis_user = \"lockwarden\"\nredis_password = \"toml-pw\"\n");
  Config c = MustLoad(sources);
  EXPECT_EQ(c.masters[0].user, "lockwarden");
  EXPECT_EQ(c.masters[0].password, "toml-pw");
  EXPECT_EQ(c.masters[1].user, "u");
  EXPECT_EQ(c.masters[1].password, "own");
  // The environment overrides the file, as for every setting.
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "env-pw";
  c = MustLoad(sources);
  EXPECT_EQ(c.masters[0].password, "env-pw");
}

}  // namespace
}  // namespace lw::config_test
