#include "core/access.h"

#include <algorithm>
#include <charconv>

namespace lw {
namespace {

std::vector<std::string_view> Words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    const size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}


bool PrintableAscii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

}  // namespace

std::optional<uint32_t> ParseId(std::string_view text) {
  uint32_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::variant<AccessRule, std::string> ParseAccessRule(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t') {
      return std::string("contains a control character");
    }
  }
  auto words = Words(text);
  const bool leases = !words.empty() && words.back() == kLeasesWord;
  if (leases) words.pop_back();
  if (words.size() < 2) {
    return std::string(leases ? "+leases needs a rule to apply to: " : "") +
           "expected \"<who> <prefix> [<prefix>...] [+leases]\", e.g. \"user:alice orders/\" "
           "or \"group:ops * +leases\"";
  }
  AccessRule rule;
  rule.leases = leases;
  rule.text = std::string(text);
  const std::string_view who = words[0];
  if (who == "any") {
    rule.who = AccessRule::Who::kAny;
  } else {
    const size_t colon = who.find(':');
    const std::string_view kind = who.substr(0, colon);
    const std::string_view value = colon == std::string_view::npos ? "" : who.substr(colon + 1);
    if (colon == std::string_view::npos || value.empty()) {
      return "\"" + std::string(who) + "\" is not uid:N, gid:N, user:NAME, group:NAME or any";
    }
    if (kind == "uid" || kind == "gid") {
      auto id = ParseId(value);
      if (!id) return "\"" + std::string(value) + "\" is not a number in " + std::string(who);
      // (uid_t)-1 is no one: the "unknown" id, which a peer whose credentials could not be read
      // would carry.
      if (*id == static_cast<uint32_t>(-1)) {
        return std::string(who) + " is the invalid id (uid_t)-1, not a user or group";
      }
      rule.who = kind == "uid" ? AccessRule::Who::kUid : AccessRule::Who::kGid;
      rule.id = *id;
    } else if (kind == "user" || kind == "group") {
      if (!PrintableAscii(value)) return "\"" + std::string(who) + "\" has an unusable name";
      rule.who = kind == "user" ? AccessRule::Who::kUser : AccessRule::Who::kGroup;
      rule.name = std::string(value);
    } else {
      return "\"" + std::string(who) + "\" is not uid:N, gid:N, user:NAME, group:NAME or any";
    }
  }
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i] == kLeasesWord) {
      return std::string("+leases must be the rule's last word: it opts the whole rule in");
    }
    // Prefixes are literal: "orders:*" would only match resources that begin with "orders:*",
    // almost surely not what was meant, and a rule that silently matches nothing is refused.
    const size_t star = words[i].find('*');
    if (words[i] != "*" && star != std::string_view::npos) {
      const std::string before(words[i].substr(0, star));
      return "prefix \"" + std::string(words[i]) + "\": prefixes are literal, not globs; write " +
             (before.empty() ? std::string() : "\"" + before + "\" for that prefix, or ") +
             "* alone for every resource";
    }
    rule.prefixes.push_back(words[i] == "*" ? std::string() : std::string(words[i]));
  }
  return rule;
}

std::variant<AccessPolicy, std::string> AccessPolicy::Build(const std::vector<std::string>& rules,
                                                            const NameResolver& resolver) {
  AccessPolicy policy;
  for (size_t i = 0; i < rules.size(); ++i) {
    const std::string where = "rule " + std::to_string(i + 1) + " (\"" + rules[i] + "\"): ";
    auto parsed = ParseAccessRule(rules[i]);
    if (auto* error = std::get_if<std::string>(&parsed)) return where + *error;
    AccessRule rule = std::get<AccessRule>(std::move(parsed));
    if (rule.who == AccessRule::Who::kUser) {
      auto uid = resolver.user ? resolver.user(rule.name) : std::nullopt;
      if (!uid) return where + "no user named \"" + rule.name + "\" on this host";
      rule.id = static_cast<uint32_t>(*uid);
    } else if (rule.who == AccessRule::Who::kGroup) {
      auto gid = resolver.group ? resolver.group(rule.name) : std::nullopt;
      if (!gid) return where + "no group named \"" + rule.name + "\" on this host";
      rule.id = static_cast<uint32_t>(*gid);
    }
    policy.rules_.push_back(std::move(rule));
  }
  return policy;
}

bool AccessPolicy::Allows(const PeerIds& peer, std::string_view resource) const {
  return rules_.empty() || Match(peer, resource, /*leases_only=*/false) != nullptr;
}

bool AccessPolicy::AllowsLeases(const PeerIds& peer, std::string_view resource) const {
  return Match(peer, resource, /*leases_only=*/true) != nullptr;
}

const AccessRule* AccessPolicy::Match(const PeerIds& peer, std::string_view resource,
                                      bool leases_only) const {
  for (const AccessRule& rule : rules_) {
    if (leases_only && !rule.leases) continue;
    bool matches = false;
    switch (rule.who) {
      case AccessRule::Who::kAny:
        matches = true;
        break;
      case AccessRule::Who::kUid:
      case AccessRule::Who::kUser:
        matches = peer.uid == static_cast<uid_t>(rule.id);
        break;
      case AccessRule::Who::kGid:
      case AccessRule::Who::kGroup:
        matches = peer.gid == static_cast<gid_t>(rule.id) ||
                  std::find(peer.groups.begin(), peer.groups.end(), static_cast<gid_t>(rule.id)) !=
                      peer.groups.end();
        break;
    }
    if (!matches) continue;
    for (const std::string& prefix : rule.prefixes) {
      if (resource.starts_with(prefix)) return &rule;
    }
  }
  return nullptr;
}

}  // namespace lw
