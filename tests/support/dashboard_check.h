#pragma once
// Checks for the Grafana dashboard in dashboards/lockwarden.json: its structure (what file
// provisioning needs) and that every metric it queries is one the agent exports. Pure
// functions over parsed JSON and /metrics text; no I/O, no Grafana, no Prometheus. Never throw
// on a malformed dashboard: a missing or mistyped field is reported as a problem or skipped.

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace lw::test {

// Structural problems of a Grafana dashboard (schemaVersion 37+ layout: a top-level "panels"
// array, rows as panels of type "row", a collapsed row's children in that row's "panels").
// Checks:
//  - templating.list has a variable "datasource" of type "datasource" with query "prometheus",
//    and variables "job" and "instance";
//  - every panel, nested ones included, has a numeric id unique across the dashboard, a
//    non-empty title and a gridPos {x, y, w, h} inside the 24-column grid (w, h > 0);
//  - panels that sit on the same grid (the top level, or one collapsed row's children) do not
//    overlap;
//  - every panel except "row" and "text" has a datasource referencing the dashboard variable
//    (uid "${datasource}" or "$datasource", or the legacy string form), at least one target
//    with a non-empty "expr", and no target whose own datasource points elsewhere (a target
//    without a datasource inherits the panel's);
//  - every panel except "row", "text", "table" and "heatmap" has a non-empty
//    fieldConfig.defaults.unit. Tables mix columns of different kinds (units go in overrides)
//    and heatmaps put their units in options.yAxis.unit / options.cellValues.unit.
// Returns one human-readable line per problem, naming the panel; empty means no problem.
std::vector<std::string> DashboardProblems(const nlohmann::json& dashboard);

// Every non-empty PromQL string of the dashboard: the "expr" of every target of every panel
// (nested panels included, in document order), then the query of every templating variable of
// type "query" (a string, or an object's "query" field as Grafana 10 writes it). Datasource,
// custom and other variable types hold no PromQL and are skipped.
std::vector<std::string> PromqlExpressions(const nlohmann::json& dashboard);

// Identifiers starting with "lockwarden_" in a PromQL expression (or a Grafana variable query
// such as label_values(...)), e.g. "lockwarden_acquire_wait_seconds_bucket". An identifier is
// a maximal run of [A-Za-z0-9_:] starting with a letter, '_' or ':'; "foo_lockwarden_x" is not
// a match. Text inside '...', "..." and `...` strings (label values, {__name__="..."}) is
// ignored, and so is the bare prefix "lockwarden_" with nothing after it.
std::set<std::string> MetricNamesIn(const std::string& promql);

// Series names a Prometheus text exposition (format 0.0.4) makes queryable: for each
// "# TYPE <name> <type>" line the family name, plus <name>_bucket, <name>_sum and <name>_count
// for a histogram and <name>_sum and <name>_count for a summary (so a family declared with no
// samples yet still counts); plus the metric name of every sample line. Other comments, blank
// lines and malformed lines are skipped.
std::set<std::string> ExportedSeriesNames(const std::string& exposition);

// Metric names the dashboard queries (MetricNamesIn over every target expr and every query
// variable) that ExportedSeriesNames(exposition) does not contain, one line each:
// `panel "<title>": <name>` or `variable "<name>": <name>`, in document order, each pair once.
// Empty means every metric the dashboard uses is exported.
std::vector<std::string> UnknownMetrics(const nlohmann::json& dashboard,
                                        const std::string& exposition);

}  // namespace lw::test
