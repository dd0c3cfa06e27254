#pragma once
// The runbooks (docs/runbooks.md, compiled into the binary by cmake/embed_web.cmake) as the admin
// listener serves them at GET /runbooks: one HTML page an alert's runbook_url can link into.
// No markdown rendering beyond headings: each heading becomes an element whose id is its anchor,
// the text between headings is kept as written (escaped, in <pre>).

#include <string>
#include <string_view>

namespace lw {

// The anchor of a markdown heading, by the rule Git forges use for docs/*.md, so a link works
// the same on the agent's page and on a rendered copy of the file: lower case, spaces become
// '-', every other character but letters, digits, '-' and '_' is dropped (bytes >= 0x80, i.e.
// UTF-8 letters, are kept). "LockwardenQuorumLost" -> "lockwardenquorumlost", "Setting up
// Prometheus" -> "setting-up-prometheus".
std::string HeadingAnchor(std::string_view heading);

// The page for `markdown`: a complete HTML document (UTF-8, no script, no style) with a table of
// contents of the level-2 headings. Headings are lines "#".."######" + space + text outside
// fenced code blocks (``` or ~~~); a repeated anchor gets "-1", "-2", ... as on the forges.
std::string RunbooksHtml(std::string_view markdown);

// docs/runbooks.md as built into this binary (generated source).
std::string_view RunbooksMarkdown();

// RunbooksHtml(RunbooksMarkdown()), rendered once.
const std::string& RunbooksPage();

}  // namespace lw
