#pragma once
// Parsing one setting's value into Config, by the type of its member: from text (an environment
// variable or flags) or from a TOML node. Each returns the reason when the value is refused,
// nullopt when it was applied.

#include <toml++/toml.h>

#include <optional>
#include <string>
#include <vector>

#include "config/setting_table.h"

namespace lw {

using Reason = std::optional<std::string>;

// Applies a setting given as text (env or flag). Only list settings take several values; a list
// replaces the values of lower-precedence sources as a whole.
Reason ApplyText(const SettingDef& def, const std::vector<std::string>& values, Config& config);

// Applies one TOML value; the TOML type must match the setting (an integer is accepted for a
// double, since "drift_factor = 0" is natural to write).
Reason ApplyToml(const SettingDef& def, const toml::node& node, Config& config);

// Splits a list from env (LOCKWARDEN_MASTERS): comma-separated, blanks around entries ignored;
// "" or blanks is an empty list.
std::vector<std::string> SplitList(const std::string& text);

}  // namespace lw
