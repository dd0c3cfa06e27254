#include "admin/runbooks_page.h"

#include <cctype>
#include <map>
#include <utility>
#include <vector>

namespace lw {
namespace {

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A heading line's level (1-6) and text, or level 0 when the line is no heading.
std::pair<int, std::string_view> HeadingOf(std::string_view line) {
  size_t level = 0;
  while (level < line.size() && line[level] == '#') ++level;
  if (level == 0 || level > 6 || level >= line.size() || line[level] != ' ') return {0, {}};
  std::string_view text = line.substr(level + 1);
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return {static_cast<int>(level), text};
}

bool IsFence(std::string_view line) {
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  return line.starts_with("```") || line.starts_with("~~~");
}

// What the page is made of, in order: headings and the text between them.
struct Block {
  int level = 0;     // 0: text
  std::string text;  // heading text, or the lines of text (each ending in '\n')
  std::string anchor;
};

std::vector<Block> Split(std::string_view markdown) {
  std::vector<Block> blocks;
  std::map<std::string, int> seen;  // anchor -> how many headings had it
  bool in_fence = false;
  while (!markdown.empty()) {
    const size_t end = markdown.find('\n');
    const std::string_view line = markdown.substr(0, end);
    markdown.remove_prefix(end == std::string_view::npos ? markdown.size() : end + 1);
    if (IsFence(line)) in_fence = !in_fence;
    const auto [level, text] = in_fence ? std::pair<int, std::string_view>{0, {}} : HeadingOf(line);
    if (level > 0) {
      std::string anchor = HeadingAnchor(text);
      const int before = seen[anchor]++;
      if (before > 0) anchor += "-" + std::to_string(before);
      blocks.push_back({level, std::string(text), std::move(anchor)});
      continue;
    }
    if (blocks.empty() || blocks.back().level != 0) blocks.push_back({});
    blocks.back().text.append(line).append("\n");
  }
  return blocks;
}

// `text` without its leading and trailing blank lines.
std::string_view TrimBlankLines(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const size_t line_start = text.rfind('\n', first);
  text.remove_prefix(line_start == std::string_view::npos ? 0 : line_start + 1);
  const size_t last = text.find_last_not_of(" \t\r\n");
  return text.substr(0, last + 1);
}

}  // namespace

std::string HeadingAnchor(std::string_view heading) {
  std::string anchor;
  for (char c : heading) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80 || std::isalnum(u) || c == '-' || c == '_') {
      anchor += static_cast<char>(std::tolower(u));
    } else if (c == ' ') {
      anchor += '-';
    }
  }
  return anchor;
}

std::string RunbooksHtml(std::string_view markdown) {
  const std::vector<Block> blocks = Split(markdown);
  std::string html =
      "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<meta name=\"color-scheme\" content=\"light dark\">\n"
      "<title>lockwarden runbooks</title>\n</head>\n<body>\n";
  std::string entries;
  for (const Block& b : blocks) {
    if (b.level != 2) continue;
    entries += "<li><a href=\"#" + b.anchor + "\">" + EscapeHtml(b.text) + "</a></li>\n";
  }
  const std::string contents = entries.empty() ? "" : "<nav>\n<ul>\n" + entries + "</ul>\n</nav>\n";
  bool contents_written = false;
  for (const Block& b : blocks) {
    // The contents go after the title (or first, when the file has none).
    if (!contents_written && b.level != 1) {
      html += contents;
      contents_written = true;
    }
    if (b.level == 0) {
      const std::string_view text = TrimBlankLines(b.text);
      if (!text.empty()) html += "<pre>" + EscapeHtml(text) + "</pre>\n";
      continue;
    }
    // Anchors hold only letters, digits, '-' and '_': nothing to escape.
    const std::string tag = "h" + std::to_string(b.level);
    html += "<" + tag + " id=\"" + b.anchor + "\">" + EscapeHtml(b.text) + "</" + tag + ">\n";
  }
  if (!contents_written) html += contents;
  html += "</body>\n</html>\n";
  return html;
}

const std::string& RunbooksPage() {
  static const std::string page = RunbooksHtml(RunbooksMarkdown());
  return page;
}

}  // namespace lw
