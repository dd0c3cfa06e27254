// Prints the setting-key part of config_fuzz's libFuzzer dictionary to stdout: for every row of
// Settings() (config/settings.def), in its order, the TOML and flag key ("node_timeout_ms") and
// the environment variable's suffix ("NODE_TIMEOUT_MS"). tests/fuzz/run.sh writes this ahead of
// tests/fuzz/config.dict (the words of TOML, URLs and rules) into the dictionary it fuzzes with,
// so a new setting reaches the fuzzer with no list to edit. The output depends on the sources
// only: the same commit gives the same dictionary, and the gate stays deterministic.

#include <cstdio>
#include <string>

#include "config/config.h"
#include "config/setting_table.h"

int main() {
  std::printf("# Setting keys from lw::Settings() (tests/fuzz/config_dict.cc).\n");
  for (const lw::SettingInfo& setting : lw::Settings()) {
    const std::string env_suffix = lw::EnvVarFor(setting.key).substr(lw::kSettingEnvPrefix.size());
    std::printf("\"%s\"\n\"%s\"\n", setting.key.c_str(), env_suffix.c_str());
  }
  return 0;
}
