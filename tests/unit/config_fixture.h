#pragma once
// What the config tests share: loading that reports a failure as a test failure, a valid config,
// sources with one master, and a fixture with a fresh directory for TOML and secret files.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "config/config.h"
#include "support/files.h"

namespace lw::config_test {

inline constexpr char kLocal[] = "redis://127.0.0.1:6379";

// Permission bits of the files the tests write.
inline constexpr mode_t k0600 = 0600;
inline constexpr mode_t k0640 = 0640;
inline constexpr mode_t k0644 = 0644;

inline MasterAddress MustParseUrl(const std::string& url) {
  auto parsed = ParseMasterUrl(url);
  if (auto* error = std::get_if<std::string>(&parsed)) {
    ADD_FAILURE() << url << ": " << *error;
    return {};
  }
  return std::get<MasterAddress>(parsed);
}

inline std::string UrlError(const std::string& url) {
  auto parsed = ParseMasterUrl(url);
  if (auto* error = std::get_if<std::string>(&parsed)) return *error;
  ADD_FAILURE() << url << " was accepted";
  return "";
}

inline Config MustLoad(const ConfigSources& sources) {
  auto loaded = LoadConfig(sources);
  if (auto* error = std::get_if<std::string>(&loaded)) {
    ADD_FAILURE() << *error;
    return {};
  }
  return std::get<Config>(loaded);
}

inline std::string LoadError(const ConfigSources& sources) {
  auto loaded = LoadConfig(sources);
  if (auto* error = std::get_if<std::string>(&loaded)) return *error;
  ADD_FAILURE() << "configuration was accepted";
  return "";
}

// A valid config: the defaults plus one master.
inline Config ValidConfig() {
  Config config;
  config.masters.push_back(MustParseUrl(kLocal));
  return config;
}

// Sources with one master given by flag, so only the setting under test can fail.
inline ConfigSources WithMasterFlag() {
  ConfigSources sources;
  sources.flags["masters"] = {kLocal};
  return sources;
}

// One change to a valid config that a rule refuses, with the key and reason it must name.
struct RuleCase {
  std::string name;
  std::function<void(Config&)> mutate;
  std::string key;
  std::string reason;
};

// Each case's change to a valid config is refused with a message naming its key and reason.
inline void ExpectEachRefused(const std::vector<RuleCase>& cases) {
  for (const RuleCase& rule : cases) {
    Config config = ValidConfig();
    rule.mutate(config);
    const auto error = ValidateConfig(config);
    ASSERT_TRUE(error.has_value()) << rule.name;
    EXPECT_THAT(*error, ::testing::StartsWith(rule.key + ": ")) << rule.name;
    EXPECT_THAT(*error, ::testing::HasSubstr(rule.reason)) << rule.name << ": " << *error;
  }
}

// Each test gets a fresh temporary directory for its TOML files.
class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::MakeTempDir("lw_config_"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Written 0640, as a config file holding a password must be; `mode` to test other modes.
  std::string Write(const std::string& name, const std::string& contents, mode_t mode = k0640) {
    return test::WriteFile((dir_ / name).string(), contents, mode);
  }

  std::filesystem::path dir_;
};

}  // namespace lw::config_test
