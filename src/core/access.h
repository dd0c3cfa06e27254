#pragma once
// Access rules: which local peers may lock which resources. Pure logic; the caller resolves
// user and group names (NSS) through the Resolver it passes in, and supplies each peer's ids
// (SO_PEERCRED, SO_PEERGROUPS).
//
// A rule is "<who> <prefix> [<prefix> ...] [+leases]":
//   who      uid:N | gid:N | user:NAME | group:NAME | any
//   prefix   a resource prefix, matched literally (no globs), or * alone for every resource
//   +leases  (last word, opt-in) the peers the rule matches may also release and extend the
//            detached leases other uids created under its prefixes (AllowsLeases)
// No rules: every peer that can open the socket may lock anything. With rules, an acquire is
// allowed when one rule matches the peer (its uid, primary gid or a supplementary group) and a
// prefix of the resource; everything else is refused. A detached lease may always be released
// and extended by its creator's uid; another uid only through a +leases rule, rules or not.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace lw {

struct AccessRule {
  enum class Who { kUid, kGid, kUser, kGroup, kAny };
  Who who = Who::kAny;
  std::string name;  // kUser, kGroup: the name as written
  uint32_t id = 0;   // kUid, kGid: the number; kUser, kGroup: filled in by resolution
  std::vector<std::string> prefixes;  // "" (written "*") matches every resource
  bool leases = false;                // written "+leases": see AllowsLeases
  std::string text;                   // the rule as written, for messages
};

// The trailing word that opts a rule into managing other uids' detached leases.
inline constexpr std::string_view kLeasesWord = "+leases";

// A uid or gid written as a whole decimal number; nullopt otherwise.
std::optional<uint32_t> ParseId(std::string_view text);

// Parses one rule; a human error naming what is wrong otherwise.
std::variant<AccessRule, std::string> ParseAccessRule(std::string_view text);

// The ids of a connected peer.
struct PeerIds {
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  std::vector<gid_t> groups;  // supplementary groups (may include gid)
};

// Looks a user or group name up; nullopt when there is no such name.
struct NameResolver {
  std::function<std::optional<uid_t>(const std::string&)> user;
  std::function<std::optional<gid_t>(const std::string&)> group;
};

class AccessPolicy {
 public:
  AccessPolicy() = default;  // open: no rules

  // Parses and resolves every rule; the first problem as "rule N (\"...\"): reason".
  static std::variant<AccessPolicy, std::string> Build(const std::vector<std::string>& rules,
                                                       const NameResolver& resolver);

  bool open() const { return rules_.empty(); }
  bool Allows(const PeerIds& peer, std::string_view resource) const;
  // May `peer` release and extend a detached lease of `resource` that another uid created? Only
  // when a +leases rule matches the peer and a prefix of the resource (never with no rules).
  bool AllowsLeases(const PeerIds& peer, std::string_view resource) const;
  size_t size() const { return rules_.size(); }

 private:
  // The first rule (of those with leases, when leases_only) matching peer and resource.
  const AccessRule* Match(const PeerIds& peer, std::string_view resource, bool leases_only) const;

  std::vector<AccessRule> rules_;
};

}  // namespace lw
