#pragma once
// The settings table inside config/: one SettingDef per row of settings.def, pointing at its
// Config member. The member's type decides how every source parses the setting (setting_value.h);
// config.h's Settings() is the public view of the same rows.

#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.h"

namespace lw {

// Every setting's environment variable starts with this (EnvVarFor).
inline constexpr std::string_view kSettingEnvPrefix = "LOCKWARDEN_";

// Who reads a setting besides `lockwarden serve`, and from which sources (settings.def).
enum class Reach { kServeOnly, kServeAndScan, kSecret };

// Where one setting lives in Config.
using SettingTarget =
    std::variant<std::string Config::*, int64_t Config::*, double Config::*, bool Config::*,
                 std::vector<MasterAddress> Config::*, std::vector<std::string> Config::*>;

// Visits a SettingTarget with one lambda per member type: std::visit(Overloaded{...}, target).
template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

struct SettingDef {
  const char* key;
  SettingTarget target;
  const char* unit;     // shown in help and in type errors
  const char* meaning;  // one short phrase for --help
  Reach reach = Reach::kServeOnly;
};

// Every row of settings.def, in its order.
const std::vector<SettingDef>& SettingDefs();

// The row of a TOML key, or nullptr when no setting has that key.
const SettingDef* FindSetting(std::string_view key);

// List settings repeat as flags, are comma-separated in env and arrays in TOML.
bool IsList(const SettingDef& def);

// "; did you mean <name>?" for the setting key closest to `wrong` (rendered by `render` as the
// source spells it), or "" when none is close enough to be a typo.
std::string Suggestion(std::string_view wrong,
                       const std::function<std::string(const std::string&)>& render);

// "<key> (<source>): <reason>", the shape of every error LoadConfig returns about a setting.
std::string SettingError(const std::string& key, const std::string& source,
                         const std::string& reason);

}  // namespace lw
