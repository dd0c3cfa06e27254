// The settings table generated from settings.def, its help lines, and the names a setting has in
// the environment and on the command line.

#include "config/setting_table.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/closest_name.h"

namespace lw {
namespace {

// The reach column of settings.def, spelled as the rows spell it.
constexpr Reach kServeOnly = Reach::kServeOnly;
constexpr Reach kServeAndScan = Reach::kServeAndScan;
constexpr Reach kSecret = Reach::kSecret;

// The default of a setting as shown in help text, read from a default-constructed Config.
std::string DefaultText(const SettingDef& def) {
  static const Config defaults;
  return std::visit(Overloaded{
                        [](std::string Config::*m) { return "\"" + defaults.*m + "\""; },
                        [](int64_t Config::*m) { return std::to_string(defaults.*m); },
                        [](bool Config::*m) { return std::string(defaults.*m ? "true" : "false"); },
                        [](double Config::*m) {
                          char buf[32];
                          const auto result = std::to_chars(buf, buf + sizeof buf, defaults.*m);
                          return std::string(buf, result.ptr);
                        },
                        [](std::vector<MasterAddress> Config::*) { return std::string("none"); },
                        [](std::vector<std::string> Config::*) { return std::string("none"); },
                    },
                    def.target);
}

}  // namespace

const std::vector<SettingDef>& SettingDefs() {
  static const std::vector<SettingDef> defs = {
#define LW_SETTING(key, type, default_value, unit, meaning, reach) \
  {#key, &Config::key, unit, meaning, reach},
#include "config/settings.def"
#undef LW_SETTING
  };
  return defs;
}

const SettingDef* FindSetting(std::string_view key) {
  for (const SettingDef& def : SettingDefs()) {
    if (key == def.key) return &def;
  }
  return nullptr;
}

bool IsList(const SettingDef& def) {
  return std::holds_alternative<std::vector<MasterAddress> Config::*>(def.target) ||
         std::holds_alternative<std::vector<std::string> Config::*>(def.target);
}

std::string Suggestion(std::string_view wrong,
                       const std::function<std::string(const std::string&)>& render) {
  std::vector<std::string_view> keys;
  for (const SettingDef& def : SettingDefs()) keys.push_back(def.key);
  // Farther than 3 edits is a guess, not a typo.
  const auto best = ClosestName(wrong, keys, 3);
  return best ? "; did you mean " + render(std::string(*best)) + "?" : "";
}

std::string SettingError(const std::string& key, const std::string& source,
                         const std::string& reason) {
  return key + " (" + source + "): " + reason;
}

const std::vector<SettingInfo>& Settings() {
  static const std::vector<SettingInfo> settings = [] {
    std::vector<SettingInfo> out;
    for (const SettingDef& def : SettingDefs()) {
      out.push_back(
          {def.key,
           std::string(def.meaning) + " (" + def.unit + ", default " + DefaultText(def) + ")",
           IsList(def), def.reach != Reach::kServeOnly, def.reach == Reach::kSecret});
    }
    return out;
  }();
  return settings;
}

std::string EnvVarFor(const std::string& key) {
  std::string name(kSettingEnvPrefix);
  for (char c : key) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

std::string FlagFor(const std::string& key) {
  if (key == "masters") return "--master";              // repeatable: one URL per occurrence
  if (key == "scan_patterns") return "--scan-pattern";  // repeatable
  // "access" is repeatable too: --access "user:alice orders/" --access "group:ops *".
  std::string flag = "--" + key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

}  // namespace lw
