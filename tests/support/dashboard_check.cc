#include "support/dashboard_check.h"

#include <cctype>
#include <cstddef>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <utility>

namespace lw::test {
namespace {

using nlohmann::json;

constexpr char kMetricPrefix[] = "lockwarden_";
constexpr int kGridColumns = 24;

// Calls visit(panel) for every panel object of the dashboard, depth first in document order:
// the top-level "panels", and the "panels" of any panel that has some (collapsed rows).
void ForEachPanel(const json& dashboard, const std::function<void(const json&)>& visit) {
  std::function<void(const json&)> walk = [&](const json& list) {
    if (!list.is_array()) return;
    for (const json& panel : list) {
      if (!panel.is_object()) continue;
      visit(panel);
      if (panel.contains("panels")) walk(panel["panels"]);
    }
  };
  if (dashboard.is_object() && dashboard.contains("panels")) walk(dashboard["panels"]);
}

// The string at `key` of an object, or "" if absent or not a string.
std::string StringAt(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_string()) return "";
  return object[key].get<std::string>();
}

// The variables of templating.list (an empty array if the dashboard has none).
const json& TemplatingList(const json& dashboard) {
  static const json kEmpty = json::array();
  if (!dashboard.is_object() || !dashboard.contains("templating")) return kEmpty;
  const json& templating = dashboard["templating"];
  if (!templating.is_object() || !templating.contains("list") || !templating["list"].is_array())
    return kEmpty;
  return templating["list"];
}

// The templating variable named `name`, or nullptr.
const json* FindVariable(const json& dashboard, const std::string& name) {
  for (const json& variable : TemplatingList(dashboard)) {
    if (StringAt(variable, "name") == name) return &variable;
  }
  return nullptr;
}

// The PromQL of a query variable: "query" as a string, or its "query" field when it is an
// object (Grafana 10); "" for other variable types.
std::string VariableQuery(const json& variable) {
  if (StringAt(variable, "type") != "query" || !variable.contains("query")) return "";
  const json& query = variable["query"];
  if (query.is_string()) return query.get<std::string>();
  return StringAt(query, "query");
}

// "panel <id> \"<title>\"" for messages.
std::string PanelLabel(const json& panel) {
  std::string id = panel.contains("id") ? panel["id"].dump() : "(no id)";
  return "panel " + id + " \"" + StringAt(panel, "title") + "\"";
}

// True if `ref` (a panel's or target's "datasource") names the ${datasource} variable.
bool ReferencesDatasourceVariable(const json& ref) {
  auto is_variable = [](const std::string& s) {
    return s == "${datasource}" || s == "$datasource";
  };
  if (ref.is_string()) return is_variable(ref.get<std::string>());
  return is_variable(StringAt(ref, "uid"));
}

void CheckVariables(const json& dashboard, std::vector<std::string>& problems) {
  const json* datasource = FindVariable(dashboard, "datasource");
  if (datasource == nullptr) {
    problems.push_back("templating: no \"datasource\" variable");
  } else if (StringAt(*datasource, "type") != "datasource" ||
             StringAt(*datasource, "query") != "prometheus") {
    problems.push_back(
        "templating: variable \"datasource\" must have type \"datasource\" and query "
        "\"prometheus\"");
  }
  for (const char* name : {"job", "instance"}) {
    if (FindVariable(dashboard, name) == nullptr)
      problems.push_back(std::string("templating: no \"") + name + "\" variable");
  }
}

struct Rect {
  long x, y, w, h;
  std::string label;
};

// Reads gridPos into `rect`; false (with a problem) if it is missing or out of the grid.
bool ReadGridPos(const json& panel, Rect& rect, std::vector<std::string>& problems) {
  const std::string label = PanelLabel(panel);
  if (!panel.contains("gridPos") || !panel["gridPos"].is_object()) {
    problems.push_back(label + ": no gridPos");
    return false;
  }
  const json& pos = panel["gridPos"];
  for (const char* key : {"x", "y", "w", "h"}) {
    if (!pos.contains(key) || !pos[key].is_number_integer()) {
      problems.push_back(label + ": gridPos." + key + " missing or not an integer");
      return false;
    }
  }
  rect = {pos["x"].get<long>(), pos["y"].get<long>(), pos["w"].get<long>(), pos["h"].get<long>(),
          label};
  if (rect.x < 0 || rect.y < 0 || rect.w <= 0 || rect.h <= 0 || rect.x + rect.w > kGridColumns) {
    problems.push_back(label + ": gridPos outside the 24-column grid");
    return false;
  }
  return true;
}

// Reports every overlapping pair among panels laid out on the same grid.
void CheckOverlaps(const std::vector<Rect>& rects, std::vector<std::string>& problems) {
  for (std::size_t i = 0; i < rects.size(); ++i) {
    for (std::size_t j = i + 1; j < rects.size(); ++j) {
      const Rect& a = rects[i];
      const Rect& b = rects[j];
      if (a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h)
        problems.push_back(a.label + " overlaps " + b.label);
    }
  }
}

// Checks one panel's own fields (not its children). Records its id in `ids`.
void CheckPanel(const json& panel, std::map<std::string, std::string>& ids,
                std::vector<std::string>& problems) {
  const std::string label = PanelLabel(panel);
  const std::string type = StringAt(panel, "type");

  if (!panel.contains("id") || !panel["id"].is_number_integer()) {
    problems.push_back(label + ": id missing or not an integer");
  } else {
    auto [it, inserted] = ids.emplace(panel["id"].dump(), label);
    if (!inserted) problems.push_back(label + ": id already used by " + it->second);
  }
  if (StringAt(panel, "title").empty()) problems.push_back(label + ": no title");

  if (type == "row" || type == "text") return;

  if (!panel.contains("datasource") || !ReferencesDatasourceVariable(panel["datasource"]))
    problems.push_back(label + ": datasource does not reference ${datasource}");

  bool has_expr = false;
  if (panel.contains("targets") && panel["targets"].is_array()) {
    for (const json& target : panel["targets"]) {
      if (!StringAt(target, "expr").empty()) has_expr = true;
      if (target.is_object() && target.contains("datasource") &&
          !ReferencesDatasourceVariable(target["datasource"])) {
        problems.push_back(label + ": target " + StringAt(target, "refId") +
                           " datasource does not reference ${datasource}");
      }
    }
  }
  if (!has_expr) problems.push_back(label + ": no target with a non-empty expr");

  if (type == "table" || type == "heatmap") return;
  std::string unit;
  if (panel.contains("fieldConfig") && panel["fieldConfig"].is_object())
    unit = StringAt(panel["fieldConfig"].value("defaults", json::object()), "unit");
  if (unit.empty()) problems.push_back(label + ": no fieldConfig.defaults.unit");
}

// Checks the panels of one grid (the top level or a collapsed row's children) and recurses.
void CheckPanelList(const json& list, std::map<std::string, std::string>& ids,
                    std::vector<std::string>& problems) {
  if (!list.is_array()) return;
  std::vector<Rect> rects;
  for (const json& panel : list) {
    if (!panel.is_object()) {
      problems.push_back("a panel is not a JSON object");
      continue;
    }
    CheckPanel(panel, ids, problems);
    Rect rect;
    if (ReadGridPos(panel, rect, problems)) rects.push_back(rect);
    if (panel.contains("panels")) CheckPanelList(panel["panels"], ids, problems);
  }
  CheckOverlaps(rects, problems);
}

// Adds `identifier` to `out` if it starts with the metric prefix and is more than the prefix.
void AddIfMetric(const std::string& identifier, std::set<std::string>& out) {
  const std::string prefix = kMetricPrefix;
  if (identifier.size() > prefix.size() && identifier.compare(0, prefix.size(), prefix) == 0)
    out.insert(identifier);
}

// `promql` with the contents of every quoted string replaced by spaces (quotes kept), so that
// label values cannot look like identifiers. Backslash escapes apply in '...' and "...", not in
// `...` (PromQL raw strings). An unterminated string blanks out the rest.
std::string BlankOutStrings(const std::string& promql) {
  std::string out = promql;
  char quote = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    char c = out[i];
    if (quote == 0) {
      if (c == '"' || c == '\'' || c == '`') quote = c;
      continue;
    }
    if (c == quote) {
      quote = 0;
    } else if (c == '\\' && quote != '`' && i + 1 < out.size()) {
      out[i] = ' ';
      out[++i] = ' ';
    } else {
      out[i] = ' ';
    }
  }
  return out;
}

// The metric name of a sample line: everything before '{' or whitespace.
std::string SampleName(const std::string& line) {
  std::size_t end = line.find_first_of("{ \t");
  return line.substr(0, end);
}

}  // namespace

std::vector<std::string> DashboardProblems(const nlohmann::json& dashboard) {
  std::vector<std::string> problems;
  if (!dashboard.is_object()) return {"dashboard is not a JSON object"};
  CheckVariables(dashboard, problems);
  if (!dashboard.contains("panels") || !dashboard["panels"].is_array() ||
      dashboard["panels"].empty()) {
    problems.push_back("dashboard has no panels");
    return problems;
  }
  std::map<std::string, std::string> ids;
  CheckPanelList(dashboard["panels"], ids, problems);
  return problems;
}

std::vector<std::string> PromqlExpressions(const nlohmann::json& dashboard) {
  std::vector<std::string> exprs;
  ForEachPanel(dashboard, [&](const json& panel) {
    if (!panel.contains("targets") || !panel["targets"].is_array()) return;
    for (const json& target : panel["targets"]) {
      std::string expr = StringAt(target, "expr");
      if (!expr.empty()) exprs.push_back(std::move(expr));
    }
  });
  for (const json& variable : TemplatingList(dashboard)) {
    std::string query = VariableQuery(variable);
    if (!query.empty()) exprs.push_back(std::move(query));
  }
  return exprs;
}

std::set<std::string> MetricNamesIn(const std::string& promql) {
  static const std::regex kIdentifier("[A-Za-z_:][A-Za-z0-9_:]*");
  const std::string text = BlankOutStrings(promql);
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kIdentifier);
       it != std::sregex_iterator(); ++it) {
    // A run that starts right after a digit (e.g. "5m") is the tail of a number or duration.
    auto pos = static_cast<std::size_t>(it->position());
    if (pos > 0 && std::isdigit(static_cast<unsigned char>(text[pos - 1]))) continue;
    AddIfMetric(it->str(), names);
  }
  return names;
}

std::set<std::string> ExportedSeriesNames(const std::string& exposition) {
  std::set<std::string> names;
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    line.erase(0, start);
    if (line[0] != '#') {
      std::string name = SampleName(line);
      if (!name.empty()) names.insert(name);
      continue;
    }
    std::istringstream comment(line);
    std::string hash, keyword, name, type;
    comment >> hash >> keyword >> name >> type;
    if (hash != "#" || keyword != "TYPE" || name.empty()) continue;
    names.insert(name);
    if (type == "histogram") names.insert(name + "_bucket");
    if (type == "histogram" || type == "summary") {
      names.insert(name + "_sum");
      names.insert(name + "_count");
    }
  }
  return names;
}

std::vector<std::string> UnknownMetrics(const nlohmann::json& dashboard,
                                        const std::string& exposition) {
  const std::set<std::string> exported = ExportedSeriesNames(exposition);
  std::vector<std::string> unknown;
  std::set<std::string> seen;
  auto report = [&](const std::string& where, const std::string& promql) {
    for (const std::string& name : MetricNamesIn(promql)) {
      if (exported.count(name) != 0) continue;
      std::string line = where + ": " + name;
      if (seen.insert(line).second) unknown.push_back(std::move(line));
    }
  };
  ForEachPanel(dashboard, [&](const json& panel) {
    if (!panel.contains("targets") || !panel["targets"].is_array()) return;
    for (const json& target : panel["targets"])
      report("panel \"" + StringAt(panel, "title") + "\"", StringAt(target, "expr"));
  });
  for (const json& variable : TemplatingList(dashboard))
    report("variable \"" + StringAt(variable, "name") + "\"", VariableQuery(variable));
  return unknown;
}

}  // namespace lw::test
