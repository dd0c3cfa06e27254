// The runbooks the agent serves at GET /runbooks (docs/runbooks.md built in), on a real agent:
// a section with the anchor of every alert's runbook_url in alerts/lockwarden.rules.yml, the
// page's security headers, and open to reads without the token even on a listener beyond
// loopback (a link from an alert carries no token).

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/agent_process.h"
#include "support/files.h"
#include "support/http.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::runbooks {
namespace {

const std::string kToken = "runbooks-test-token-0123456789";

std::string SourceFile(const std::string& relative) {
  return ReadFileOrThrow((std::filesystem::path(LOCKWARDEN_SOURCE_DIR) / relative).string());
}

struct RunbookLink {
  std::string alert;
  std::string anchor;  // after the '#' of its runbook_url, "" when it has none
};

// Each alert of the rules file with the anchor of its runbook_url, in file order.
std::vector<RunbookLink> RunbookLinks(const std::string& rules) {
  static const std::regex kAlert(R"(^\s*- alert:\s*(\w+))");
  static const std::regex kUrl(R"(^\s*runbook_url:.*#([A-Za-z0-9_-]+)['"]\s*$)");
  std::vector<RunbookLink> links;
  std::istringstream in(rules);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, kAlert)) links.push_back({m.str(1), ""});
    if (std::regex_search(line, m, kUrl) && !links.empty()) links.back().anchor = m.str(1);
  }
  return links;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

class RunbooksTest : public ::testing::Test {
 protected:
  ~RunbooksTest() override { std::filesystem::remove_all(dir_); }

  std::string dir_ = MakeTempDir("lw-runbooks-");
  std::string token_path_ = WriteFile(dir_ + "/token", kToken);
  RedisCluster cluster_{1};
  int port_ = 0;
  // Beyond loopback: every read of state needs the token there, so an open page shows here.
  std::unique_ptr<AgentProcess> agent_ =
      AgentOnFreePort(cluster_, "0.0.0.0", {"--admin-token-file", token_path_}, &port_);
};

TEST_F(RunbooksTest, EveryAlertsRunbookUrlAnchorIsASectionOfThePage) {
  const HttpResult page = HttpGet(port_, "/runbooks");  // no token
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");

  const std::vector<RunbookLink> links = RunbookLinks(SourceFile("alerts/lockwarden.rules.yml"));
  ASSERT_GE(links.size(), 14u);
  const std::string docs = SourceFile("docs/runbooks.md");
  for (const RunbookLink& link : links) {
    EXPECT_EQ(link.anchor, Lower(link.alert)) << link.alert << ": its runbook_url's anchor";
    EXPECT_NE(docs.find("\n## " + link.alert + "\n"), std::string::npos)
        << "docs/runbooks.md has no section for " << link.alert;
    EXPECT_NE(page.body.find("<h2 id=\"" + link.anchor + "\">" + link.alert + "</h2>"),
              std::string::npos)
        << "/runbooks has no element with id " << link.anchor;
    EXPECT_NE(page.body.find("<a href=\"#" + link.anchor + "\">"), std::string::npos)
        << "the contents do not list " << link.alert;
  }
  // The text is the built-in docs/runbooks.md, escaped: no markup of its own.
  EXPECT_NE(page.body.find("<title>lockwarden runbooks</title>"), std::string::npos);
  EXPECT_NE(page.body.find("lockwarden_quorum_margin &lt; 0"), std::string::npos);
  EXPECT_EQ(page.body.find("<script"), std::string::npos);
}

TEST_F(RunbooksTest, ServedWithThePagesSecurityHeadersAndNoState) {
  const HttpResult page = HttpGet(port_, "/runbooks");
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_EQ(page.Header("Content-Security-Policy"),
            HttpGet(port_, "/").Header("Content-Security-Policy"));
  EXPECT_NE(page.Header("Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  EXPECT_NE(page.Header("Content-Security-Policy").find("frame-ancestors 'none'"),
            std::string::npos);
  EXPECT_EQ(page.Header("X-Frame-Options"), "DENY");
  EXPECT_EQ(page.Header("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(page.Header("Referrer-Policy"), "no-referrer");
  // The same bytes with or without the token: nothing of this agent's state is in them.
  const HttpResult with_token =
      HttpGet(port_, "/runbooks", {{"Authorization", "Bearer " + kToken}});
  EXPECT_EQ(with_token.body, page.body);
  // Only GET: the path is no action.
  EXPECT_NE(HttpPost(port_, "/runbooks", "{}").status, 200);
}

}  // namespace
}  // namespace lw::test::runbooks
