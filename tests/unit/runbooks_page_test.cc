// The runbooks page (admin/runbooks_page.h): heading anchors, escaping, fenced code, and the
// copy of docs/runbooks.md built into this binary.

#include "admin/runbooks_page.h"

#include <gtest/gtest.h>

#include <string>

namespace lw::runbooks_page_test {
namespace {

bool Has(const std::string& html, const std::string& part) {
  return html.find(part) != std::string::npos;
}

TEST(HeadingAnchor, FollowsTheForgesRule) {
  EXPECT_EQ(HeadingAnchor("LockwardenQuorumLost"), "lockwardenquorumlost");
  EXPECT_EQ(HeadingAnchor("Setting up Prometheus"), "setting-up-prometheus");
  EXPECT_EQ(HeadingAnchor("`lockwarden status` (CLI)"), "lockwarden-status-cli");
  EXPECT_EQ(HeadingAnchor("snake_case and dash-ed"), "snake_case-and-dash-ed");
  EXPECT_EQ(HeadingAnchor("Prüfung"), "prüfung");
}

TEST(RunbooksHtml, HeadingsBecomeElementsWithTheirAnchorAndAContentsEntry) {
  const std::string html = RunbooksHtml(
      "# Runbooks\n\nIntro.\n\n## LockwardenQuorumLost\n\nDo this.\n### Details\nMore.\n");
  EXPECT_TRUE(html.starts_with("<!doctype html>")) << html;
  EXPECT_TRUE(Has(html, "<h1 id=\"runbooks\">Runbooks</h1>")) << html;
  EXPECT_TRUE(Has(html, "<h2 id=\"lockwardenquorumlost\">LockwardenQuorumLost</h2>")) << html;
  EXPECT_TRUE(Has(html, "<h3 id=\"details\">Details</h3>")) << html;
  EXPECT_TRUE(Has(html, "<pre>Intro.</pre>")) << html;
  EXPECT_TRUE(Has(html, "<pre>Do this.</pre>")) << html;
  // Contents: level-2 headings only, after the title.
  EXPECT_TRUE(Has(html, "<li><a href=\"#lockwardenquorumlost\">LockwardenQuorumLost</a></li>"))
      << html;
  EXPECT_FALSE(Has(html, "href=\"#details\"")) << html;
  EXPECT_LT(html.find("<h1"), html.find("<nav>"));
  EXPECT_LT(html.find("<nav>"), html.find("<pre>Intro."));
}

TEST(RunbooksHtml, TextIsEscapedAndNothingRunsOrStyles) {
  const std::string html =
      RunbooksHtml("## A <b> & \"c\"\n<script>alert('x')</script> a < b && c > d\n");
  EXPECT_TRUE(Has(html, "<h2 id=\"a-b--c\">A &lt;b&gt; &amp; &quot;c&quot;</h2>")) << html;
  EXPECT_TRUE(
      Has(html, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; a &lt; b &amp;&amp; c &gt; d"))
      << html;
  EXPECT_FALSE(Has(html, "<script")) << html;
  EXPECT_FALSE(Has(html, "<style")) << html;
  EXPECT_FALSE(Has(html, "style=")) << html;
}

TEST(RunbooksHtml, LinesInFencedCodeAreNotHeadings) {
  const std::string html = RunbooksHtml(
      "## Setup\n```yaml\n# prometheus.yml\nglobal: {}\n```\n~~~\n## not a heading\n~~~\n");
  EXPECT_FALSE(Has(html, "id=\"prometheusyml\"")) << html;
  EXPECT_FALSE(Has(html, "id=\"not-a-heading\"")) << html;
  EXPECT_TRUE(Has(
      html, "<pre>```yaml\n# prometheus.yml\nglobal: {}\n```\n~~~\n## not a heading\n~~~</pre>"))
      << html;
}

TEST(RunbooksHtml, RepeatedHeadingsGetNumberedAnchors) {
  const std::string html = RunbooksHtml("## Check\na\n## Check\nb\n## Check\nc\n");
  EXPECT_TRUE(Has(html, "<h2 id=\"check\">")) << html;
  EXPECT_TRUE(Has(html, "<h2 id=\"check-1\">")) << html;
  EXPECT_TRUE(Has(html, "<h2 id=\"check-2\">")) << html;
}

TEST(RunbooksHtml, WhatLooksLikeAHeadingButIsNot) {
  const std::string html = RunbooksHtml("#hashtag\n####### seven\n#\n");
  const std::string body = html.substr(html.find("<body>"));
  EXPECT_FALSE(Has(body, " id=")) << body;
  EXPECT_FALSE(Has(body, "<nav>")) << body;  // no level-2 heading: no contents
  EXPECT_TRUE(Has(html, "<pre>#hashtag\n####### seven\n#</pre>")) << html;
}

TEST(RunbooksPage, IsTheBuiltInDocsRunbooks) {
  const std::string& page = RunbooksPage();
  EXPECT_TRUE(RunbooksMarkdown().starts_with("# Runbooks\n"));
  EXPECT_TRUE(Has(page, "<h2 id=\"lockwardenquorumlost\">LockwardenQuorumLost</h2>"));
  EXPECT_TRUE(Has(page, "<h2 id=\"setting-up-prometheus\">"));
  // The comments of its YAML examples ("# prometheus.yml") stay text.
  EXPECT_EQ(page.find("<h1"), page.rfind("<h1"));
  EXPECT_FALSE(Has(page, "id=\"prometheusyml\""));
  EXPECT_EQ(&page, &RunbooksPage());  // rendered once
}

}  // namespace
}  // namespace lw::runbooks_page_test
