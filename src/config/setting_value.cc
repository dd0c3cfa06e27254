// Values of settings by type: integers, booleans, numbers, strings, master URLs and string lists,
// from text and from TOML.

#include "config/setting_value.h"

#include <charconv>

namespace lw {
namespace {

Reason ParseInt(const std::string& text, const char* unit, int64_t& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec == std::errc::result_out_of_range) return "\"" + text + "\" is out of range";
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return "expected an integer (" + std::string(unit) + "), got \"" + text + "\"";
  }
  return std::nullopt;
}

Reason ParseBool(const std::string& text, bool& out) {
  if (text == "true" || text == "1") {
    out = true;
  } else if (text == "false" || text == "0") {
    out = false;
  } else {
    return "expected true or false, got \"" + text + "\"";
  }
  return std::nullopt;
}

Reason ParseDouble(const std::string& text, double& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return "expected a number such as 0.01, got \"" + text + "\"";
  }
  return std::nullopt;
}

// Parses every URL; the list replaces the masters of lower-precedence sources as a whole.
Reason ParseMasters(const std::vector<std::string>& urls, std::vector<MasterAddress>& out) {
  std::vector<MasterAddress> masters;
  for (size_t i = 0; i < urls.size(); ++i) {
    if (urls[i].empty()) return "entry " + std::to_string(i + 1) + " is empty";
    auto parsed = ParseMasterUrl(urls[i]);
    if (auto* error = std::get_if<std::string>(&parsed)) return *error;
    masters.push_back(std::get<MasterAddress>(std::move(parsed)));
  }
  out = std::move(masters);
  return std::nullopt;
}

Reason ParseStrings(const std::vector<std::string>& values, std::vector<std::string>& out) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].empty()) return "entry " + std::to_string(i + 1) + " is empty";
  }
  out = values;
  return std::nullopt;
}

std::string TomlTypeName(toml::node_type type) {
  switch (type) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

std::string Expected(const std::string& what, const toml::node& node) {
  return "expected " + what + ", got " + TomlTypeName(node.type());
}

Reason TomlStrings(const toml::node& node, const std::string& example,
                   std::vector<std::string>& out) {
  const toml::array* array = node.as_array();
  if (array == nullptr) return Expected("an array of strings, e.g. " + example, node);
  out.clear();
  for (const toml::node& element : *array) {
    const auto* text = element.as_string();
    if (text == nullptr) {
      return "entry " + std::to_string(out.size() + 1) + ": " + Expected("a string", element);
    }
    out.push_back(text->get());
  }
  return std::nullopt;
}

}  // namespace

Reason ApplyText(const SettingDef& def, const std::vector<std::string>& values, Config& config) {
  if (!IsList(def) && values.size() != 1) {
    return "given " + std::to_string(values.size()) + " times; give it once";
  }
  return std::visit(
      Overloaded{
          [&](std::string Config::*m) -> Reason {
            config.*m = values.front();
            return std::nullopt;
          },
          [&](int64_t Config::*m) { return ParseInt(values.front(), def.unit, config.*m); },
          [&](double Config::*m) { return ParseDouble(values.front(), config.*m); },
          [&](bool Config::*m) { return ParseBool(values.front(), config.*m); },
          [&](std::vector<MasterAddress> Config::*m) { return ParseMasters(values, config.*m); },
          [&](std::vector<std::string> Config::*m) { return ParseStrings(values, config.*m); },
      },
      def.target);
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  if (text.find_first_not_of(" \t") == std::string::npos) return items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    items.push_back(first == std::string::npos ? "" : item.substr(first, last - first + 1));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

Reason ApplyToml(const SettingDef& def, const toml::node& node, Config& config) {
  return std::visit(
      Overloaded{
          [&](std::string Config::*m) -> Reason {
            const auto* value = node.as_string();
            if (value == nullptr) return Expected("a string", node);
            config.*m = value->get();
            return std::nullopt;
          },
          [&](int64_t Config::*m) -> Reason {
            const auto* value = node.as_integer();
            if (value == nullptr) {
              return Expected("an integer (" + std::string(def.unit) + ")", node);
            }
            config.*m = value->get();
            return std::nullopt;
          },
          [&](bool Config::*m) -> Reason {
            const auto* value = node.as_boolean();
            if (value == nullptr) return Expected("true or false", node);
            config.*m = value->get();
            return std::nullopt;
          },
          [&](double Config::*m) -> Reason {
            if (const auto* value = node.as_floating_point()) {
              config.*m = value->get();
            } else if (const auto* whole = node.as_integer()) {
              config.*m = static_cast<double>(whole->get());
            } else {
              return Expected("a number", node);
            }
            return std::nullopt;
          },
          [&](std::vector<MasterAddress> Config::*m) -> Reason {
            std::vector<std::string> urls;
            if (auto r = TomlStrings(node, "masters = [\"redis://127.0.0.1:6379\"]", urls)) {
              return r;
            }
            return ParseMasters(urls, config.*m);
          },
          [&](std::vector<std::string> Config::*m) -> Reason {
            std::vector<std::string> items;
            if (auto r = TomlStrings(node, std::string(def.key) + " = [\"...\"]", items)) {
              return r;
            }
            return ParseStrings(items, config.*m);
          },
      },
      def.target);
}

}  // namespace lw
