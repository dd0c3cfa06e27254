#include "support/dashboard_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace lw::test {
namespace {

using nlohmann::json;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// A minimal dashboard that passes DashboardProblems: the three variables, one row and two
// panels side by side.
json GoodDashboard() {
  return json::parse(R"json({
    "title": "t",
    "templating": {"list": [
      {"name": "datasource", "type": "datasource", "query": "prometheus"},
      {"name": "job", "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
       "query": "label_values(lockwarden_build_info, job)"},
      {"name": "instance", "type": "query",
       "datasource": {"type": "prometheus", "uid": "${datasource}"},
       "query": {"query": "label_values(lockwarden_build_info{job=~\"$job\"}, instance)",
                 "refId": "A"}}
    ]},
    "panels": [
      {"type": "row", "id": 1, "title": "Row", "collapsed": false,
       "gridPos": {"x": 0, "y": 0, "w": 24, "h": 1}, "panels": []},
      {"type": "timeseries", "id": 2, "title": "Wait p99",
       "datasource": {"type": "prometheus", "uid": "${datasource}"},
       "gridPos": {"x": 0, "y": 1, "w": 12, "h": 8},
       "fieldConfig": {"defaults": {"unit": "s"}, "overrides": []},
       "targets": [{"refId": "A", "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "expr": "histogram_quantile(0.99, sum by (le) (rate(lockwarden_acquire_wait_seconds_bucket{job=~\"$job\"}[$__rate_interval])))"}]},
      {"type": "heatmap", "id": 3, "title": "Wait heatmap",
       "datasource": {"type": "prometheus", "uid": "$datasource"},
       "gridPos": {"x": 12, "y": 1, "w": 12, "h": 8},
       "targets": [{"refId": "A", "format": "heatmap",
                    "expr": "sum by (le) (rate(lockwarden_acquire_wait_seconds_bucket[5m]))"}]}
    ]
  })json");
}

// Exposition with the families GoodDashboard uses, one histogram declared without samples.
constexpr char kExposition[] = R"(# HELP lockwarden_build_info Build.
# TYPE lockwarden_build_info gauge
lockwarden_build_info{version="0.1.0",commit="abc"} 1
# HELP lockwarden_acquire_wait_seconds Wait.
# TYPE lockwarden_acquire_wait_seconds histogram
)";

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

TEST(DashboardProblemsTest, GoodDashboardHasNone) {
  EXPECT_THAT(DashboardProblems(GoodDashboard()), IsEmpty());
}

TEST(DashboardProblemsTest, ReportsMissingVariables) {
  json dashboard = GoodDashboard();
  dashboard["templating"]["list"] =
      json::array({{{"name", "datasource"}, {"type", "query"}, {"query", "prometheus"}}});
  std::string problems = Joined(DashboardProblems(dashboard));
  EXPECT_THAT(problems, HasSubstr("\"datasource\" must have type \"datasource\""));
  EXPECT_THAT(problems, HasSubstr("no \"job\" variable"));
  EXPECT_THAT(problems, HasSubstr("no \"instance\" variable"));
}

TEST(DashboardProblemsTest, ReportsPanelDefects) {
  json dashboard = GoodDashboard();
  json& panel = dashboard["panels"][1];
  panel["datasource"] = {{"type", "prometheus"}, {"uid", "P1809F7CD0C75ACF3"}};
  panel["targets"][0]["datasource"] = panel["datasource"];
  panel["fieldConfig"]["defaults"].erase("unit");
  panel["targets"][0]["expr"] = "";
  dashboard["panels"][2]["id"] = 2;
  std::string problems = Joined(DashboardProblems(dashboard));
  EXPECT_THAT(problems, HasSubstr("panel 2 \"Wait p99\": datasource does not reference"));
  EXPECT_THAT(problems, HasSubstr("target A datasource does not reference"));
  EXPECT_THAT(problems, HasSubstr("\"Wait p99\": no fieldConfig.defaults.unit"));
  EXPECT_THAT(problems, HasSubstr("\"Wait p99\": no target with a non-empty expr"));
  EXPECT_THAT(problems, HasSubstr("\"Wait heatmap\": id already used by panel 2 \"Wait p99\""));
}

TEST(DashboardProblemsTest, ReportsGridPosDefects) {
  json dashboard = GoodDashboard();
  dashboard["panels"][1].erase("gridPos");
  dashboard["panels"][2]["gridPos"]["x"] = 0;
  EXPECT_THAT(Joined(DashboardProblems(dashboard)), HasSubstr("\"Wait p99\": no gridPos"));

  dashboard = GoodDashboard();
  dashboard["panels"][2]["gridPos"]["x"] = 6;
  EXPECT_THAT(Joined(DashboardProblems(dashboard)),
              HasSubstr("\"Wait p99\" overlaps panel 3 \"Wait heatmap\""));

  dashboard = GoodDashboard();
  dashboard["panels"][2]["gridPos"]["x"] = 14;
  EXPECT_THAT(Joined(DashboardProblems(dashboard)),
              HasSubstr("\"Wait heatmap\": gridPos outside the 24-column grid"));
}

TEST(DashboardProblemsTest, ChecksPanelsNestedInCollapsedRows) {
  json dashboard = GoodDashboard();
  json nested = dashboard["panels"][1];
  nested["id"] = 7;
  nested["title"] = "Nested";
  nested.erase("datasource");
  dashboard["panels"][0]["collapsed"] = true;
  dashboard["panels"][0]["panels"].push_back(nested);
  std::string problems = Joined(DashboardProblems(dashboard));
  EXPECT_THAT(problems, HasSubstr("panel 7 \"Nested\": datasource does not reference"));
  // The nested panel shares its gridPos with a top-level panel: different grids, no overlap.
  EXPECT_THAT(problems, Not(HasSubstr("overlaps")));
}

TEST(DashboardProblemsTest, RowAndTextPanelsNeedNoDatasourceTargetsOrUnit) {
  json dashboard = GoodDashboard();
  dashboard["panels"].push_back(json::parse(R"({"type": "text", "id": 9, "title": "Notes",
      "gridPos": {"x": 0, "y": 9, "w": 24, "h": 3}, "options": {"content": "hi"}})"));
  EXPECT_THAT(DashboardProblems(dashboard), IsEmpty());
}

TEST(PromqlExpressionsTest, CollectsTargetsRecursivelyThenQueryVariables) {
  json dashboard = GoodDashboard();
  dashboard["panels"][0]["panels"].push_back(
      {{"type", "stat"}, {"targets", {{{"expr", "lockwarden_sessions"}}, {{"expr", ""}}}}});
  std::vector<std::string> exprs = PromqlExpressions(dashboard);
  ASSERT_EQ(exprs.size(), 5u);
  EXPECT_EQ(exprs[0], "lockwarden_sessions");
  EXPECT_THAT(exprs[1], HasSubstr("histogram_quantile(0.99"));
  EXPECT_EQ(exprs[2], "sum by (le) (rate(lockwarden_acquire_wait_seconds_bucket[5m]))");
  EXPECT_EQ(exprs[3], "label_values(lockwarden_build_info, job)");
  EXPECT_EQ(exprs[4], "label_values(lockwarden_build_info{job=~\"$job\"}, instance)");
}

TEST(MetricNamesInTest, FindsPrefixedIdentifiersOnly) {
  EXPECT_THAT(
      MetricNamesIn("sum(rate(lockwarden_failures_total{job=~\"$job\"}[$__rate_interval])) / "
                    "on(instance) lockwarden_masters_up + up + foo_lockwarden_x"),
      ElementsAre("lockwarden_failures_total", "lockwarden_masters_up"));
}

TEST(MetricNamesInTest, IgnoresQuotedStrings) {
  EXPECT_THAT(MetricNamesIn("count({__name__=~\"lockwarden_.+\", a='lockwarden_b', "
                            "c=`lockwarden_raw\\`} + lockwarden_sessions{d=\"x\\\"lockwarden_y\"}"),
              ElementsAre("lockwarden_sessions"));
}

TEST(MetricNamesInTest, IgnoresBarePrefixAndNumbers) {
  EXPECT_THAT(MetricNamesIn("lockwarden_ + 1e5 + rate(x[5m:1m])"), IsEmpty());
}

TEST(ExportedSeriesNamesTest, ExpandsHistogramsAndSummaries) {
  std::set<std::string> names = ExportedSeriesNames(
      "# HELP lockwarden_lock_hold_seconds Hold.\r\n"
      "# TYPE lockwarden_lock_hold_seconds histogram\r\n"
      "# TYPE rpc_seconds summary\n"
      "rpc_seconds{quantile=\"0.5\"} 1\n"
      "\n"
      "# TYPE lockwarden_requests_total counter\n"
      "lockwarden_requests_total{op=\"acquire\"} 3\n"
      "lockwarden_sessions 2 1700000000000\n");
  EXPECT_THAT(names,
              ElementsAre("lockwarden_lock_hold_seconds", "lockwarden_lock_hold_seconds_bucket",
                          "lockwarden_lock_hold_seconds_count", "lockwarden_lock_hold_seconds_sum",
                          "lockwarden_requests_total", "lockwarden_sessions", "rpc_seconds",
                          "rpc_seconds_count", "rpc_seconds_sum"));
}

TEST(UnknownMetricsTest, AcceptsHistogramBucketReference) {
  EXPECT_THAT(UnknownMetrics(GoodDashboard(), kExposition), IsEmpty());
}

TEST(UnknownMetricsTest, ReportsMisspelledMetricWithPanelTitle) {
  json dashboard = GoodDashboard();
  dashboard["panels"][1]["targets"].push_back(
      {{"refId", "B"}, {"expr", "sum(rate(lockwarden_acquire_wait_second_count[5m]))"}});
  dashboard["panels"][1]["targets"].push_back(
      {{"refId", "C"}, {"expr", "lockwarden_acquire_wait_second_count * 2"}});
  std::vector<std::string> unknown = UnknownMetrics(dashboard, kExposition);
  EXPECT_THAT(unknown, ElementsAre("panel \"Wait p99\": lockwarden_acquire_wait_second_count"));
}

TEST(UnknownMetricsTest, ReportsMetricsOfVariablesAndMissingFamilies) {
  std::vector<std::string> unknown = UnknownMetrics(GoodDashboard(), "");
  EXPECT_THAT(unknown, Contains("variable \"job\": lockwarden_build_info"));
  EXPECT_THAT(unknown, Contains("variable \"instance\": lockwarden_build_info"));
  EXPECT_THAT(unknown, Contains("panel \"Wait heatmap\": lockwarden_acquire_wait_seconds_bucket"));
}

}  // namespace
}  // namespace lw::test
