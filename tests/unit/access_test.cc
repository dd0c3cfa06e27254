// Access rules (core/access): parsing, resolution of names through a fake resolver, and the
// decision for a peer's uid, primary gid and supplementary groups.

#include "core/access.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace lw {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

AccessRule MustParse(const std::string& text) {
  auto parsed = ParseAccessRule(text);
  if (auto* error = std::get_if<std::string>(&parsed)) {
    ADD_FAILURE() << text << ": " << *error;
    return {};
  }
  return std::get<AccessRule>(parsed);
}

std::string ParseError(const std::string& text) {
  auto parsed = ParseAccessRule(text);
  if (auto* error = std::get_if<std::string>(&parsed)) return *error;
  ADD_FAILURE() << "\"" << text << "\" was accepted";
  return "";
}

// A host with users alice (1001), bob (1002) and groups ops (2001), deploy (2002).
NameResolver FakeHost() {
  static const std::map<std::string, uid_t> users = {{"alice", 1001}, {"bob", 1002}};
  static const std::map<std::string, gid_t> groups = {{"ops", 2001}, {"deploy", 2002}};
  NameResolver resolver;
  resolver.user = [](const std::string& name) -> std::optional<uid_t> {
    auto it = users.find(name);
    return it == users.end() ? std::nullopt : std::optional<uid_t>(it->second);
  };
  resolver.group = [](const std::string& name) -> std::optional<gid_t> {
    auto it = groups.find(name);
    return it == groups.end() ? std::nullopt : std::optional<gid_t>(it->second);
  };
  return resolver;
}

AccessPolicy MustBuild(const std::vector<std::string>& rules) {
  auto built = AccessPolicy::Build(rules, FakeHost());
  if (auto* error = std::get_if<std::string>(&built)) {
    ADD_FAILURE() << *error;
    return {};
  }
  return std::get<AccessPolicy>(std::move(built));
}

std::string BuildError(const std::vector<std::string>& rules, const NameResolver& resolver) {
  auto built = AccessPolicy::Build(rules, resolver);
  if (auto* error = std::get_if<std::string>(&built)) return *error;
  ADD_FAILURE() << "the rules were accepted";
  return "";
}

PeerIds PeerWith(uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) {
  PeerIds peer;
  peer.uid = uid;
  peer.gid = gid;
  peer.groups = std::move(groups);
  return peer;
}

// ---------------------------------------------------------------------------------------------
// Parsing.

TEST(AccessRuleParse, EveryKindOfWho) {
  AccessRule uid = MustParse("uid:1000 orders/");
  EXPECT_EQ(uid.who, AccessRule::Who::kUid);
  EXPECT_EQ(uid.id, 1000u);
  EXPECT_EQ(uid.prefixes, (std::vector<std::string>{"orders/"}));
  EXPECT_EQ(uid.text, "uid:1000 orders/");

  AccessRule gid = MustParse("gid:0 a b c");
  EXPECT_EQ(gid.who, AccessRule::Who::kGid);
  EXPECT_EQ(gid.id, 0u);
  EXPECT_EQ(gid.prefixes, (std::vector<std::string>{"a", "b", "c"}));

  AccessRule user = MustParse("user:alice *");
  EXPECT_EQ(user.who, AccessRule::Who::kUser);
  EXPECT_EQ(user.name, "alice");
  EXPECT_EQ(user.prefixes, (std::vector<std::string>{""})) << "* is every resource";

  AccessRule group = MustParse("group:ops-team jobs:");
  EXPECT_EQ(group.who, AccessRule::Who::kGroup);
  EXPECT_EQ(group.name, "ops-team");

  AccessRule any = MustParse("any public:");
  EXPECT_EQ(any.who, AccessRule::Who::kAny);
  EXPECT_EQ(any.prefixes, (std::vector<std::string>{"public:"}));
}

TEST(AccessRuleParse, BlanksAndTabsSeparateWords) {
  AccessRule rule = MustParse("  user:bob \t orders/  \tinvoices/ ");
  EXPECT_EQ(rule.name, "bob");
  EXPECT_EQ(rule.prefixes, (std::vector<std::string>{"orders/", "invoices/"}));
  EXPECT_EQ(MustParse("uid:4294967294 x").id, 4294967294u) << "the largest real id";
}

TEST(AccessRuleParse, ErrorsSayWhatIsWrong) {
  struct Case {
    std::string rule;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"", "expected \"<who> <prefix> [<prefix>...] [+leases]\""},
      {"   ", "expected \"<who> <prefix>"},
      {"any", "expected \"<who> <prefix>"},
      {"user:alice", "expected \"<who> <prefix>"},
      {"alice orders/", "\"alice\" is not uid:N, gid:N, user:NAME, group:NAME or any"},
      {"ANY *", "\"ANY\" is not uid:N"},
      {"host:web1 *", "\"host:web1\" is not uid:N"},
      {"uid: *", "\"uid:\" is not uid:N"},
      {"user: *", "\"user:\" is not uid:N"},
      {"uid:abc *", "\"abc\" is not a number in uid:abc"},
      {"uid:-1 *", "\"-1\" is not a number"},
      {"gid:1.5 *", "\"1.5\" is not a number"},
      {"uid:4294967296 *", "\"4294967296\" is not a number"},
      {"uid:4294967295 *", "the invalid id"},
      {"gid:4294967295 *", "the invalid id"},
      {"user:al\xc3\xa9 *", "has an unusable name"},
      {"user:alice\x01 *", "control character"},
      {"group:ops orders\n", "control character"},
      {"user:alice orders:*", "prefixes are literal, not globs; write \"orders:\" for that prefix"},
      {"user:alice *orders", "prefixes are literal, not globs; write * alone"},
      {"any a b:* c", "prefix \"b:*\""},
      {"+leases", "+leases needs a rule to apply to"},
      {"user:alice +leases", "+leases needs a rule to apply to"},
      {"user:alice +leases orders/", "+leases must be the rule's last word"},
      {"user:alice orders/ +leases +leases", "+leases must be the rule's last word"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseError(c.rule), HasSubstr(c.expected)) << "rule \"" << c.rule << "\"";
  }
}

TEST(AccessRuleParse, TrailingLeasesWordOptsTheRuleIn) {
  AccessRule rule = MustParse("group:ops jobs/ cron/ +leases");
  EXPECT_TRUE(rule.leases);
  EXPECT_EQ(rule.prefixes, (std::vector<std::string>{"jobs/", "cron/"})) << "not a prefix";
  EXPECT_EQ(rule.text, "group:ops jobs/ cron/ +leases");
  EXPECT_TRUE(MustParse("any *\t+leases ").leases);
  EXPECT_FALSE(MustParse("any * +lease").leases) << "only the exact word";
  EXPECT_EQ(MustParse("any * +lease").prefixes, (std::vector<std::string>{"", "+lease"}));
  EXPECT_FALSE(MustParse("uid:1 a").leases);
}

// ---------------------------------------------------------------------------------------------
// Building a policy: parse and resolve.

TEST(AccessPolicyBuild, ResolvesNamesThroughTheResolver) {
  const AccessPolicy policy = MustBuild({"user:alice a:", "group:deploy d:"});
  EXPECT_EQ(policy.size(), 2u);
  EXPECT_FALSE(policy.open());
  EXPECT_TRUE(policy.Allows(PeerWith(1001, 100), "a:1"));
  EXPECT_FALSE(policy.Allows(PeerWith(1002, 100), "a:1")) << "bob is not alice";
  EXPECT_TRUE(policy.Allows(PeerWith(1002, 100, {2002}), "d:1"));
}

TEST(AccessPolicyBuild, UnknownUserOrGroupIsAnErrorNamingTheRule) {
  EXPECT_EQ(BuildError({"user:alice a:", "user:mallory *"}, FakeHost()),
            "rule 2 (\"user:mallory *\"): no user named \"mallory\" on this host");
  EXPECT_EQ(BuildError({"group:wheel *"}, FakeHost()),
            "rule 1 (\"group:wheel *\"): no group named \"wheel\" on this host");
  // A name is never taken for a number, nor a user for a group.
  EXPECT_THAT(BuildError({"group:alice *"}, FakeHost()), HasSubstr("no group named \"alice\""));
  EXPECT_THAT(BuildError({"user:ops *"}, FakeHost()), HasSubstr("no user named \"ops\""));
}

TEST(AccessPolicyBuild, AResolverWithoutLookupsKnowsNoName) {
  const NameResolver none;
  EXPECT_THAT(BuildError({"user:alice *"}, none), HasSubstr("no user named \"alice\""));
  EXPECT_THAT(BuildError({"group:ops *"}, none), HasSubstr("no group named \"ops\""));
  // Numbers and "any" need no resolver.
  auto built = AccessPolicy::Build({"uid:5 *", "gid:6 *", "any x"}, none);
  ASSERT_TRUE(std::holds_alternative<AccessPolicy>(built)) << std::get<std::string>(built);
  EXPECT_EQ(std::get<AccessPolicy>(built).size(), 3u);
}

TEST(AccessPolicyBuild, ParseErrorsNameTheRule) {
  EXPECT_THAT(BuildError({"uid:1 *", "uid:x *"}, FakeHost()),
              StartsWith("rule 2 (\"uid:x *\"): \"x\" is not a number"));
}

// ---------------------------------------------------------------------------------------------
// Allows.

TEST(AccessPolicyAllows, NoRulesIsOpen) {
  const AccessPolicy open;
  EXPECT_TRUE(open.open());
  EXPECT_TRUE(open.Allows(PeerWith(1234, 1234), "anything"));
  EXPECT_TRUE(open.Allows(PeerIds{}, "even:an-unknown-peer"));
  EXPECT_TRUE(MustBuild({}).open());
}

TEST(AccessPolicyAllows, ByUid) {
  const AccessPolicy policy = MustBuild({"uid:1000 orders/"});
  EXPECT_TRUE(policy.Allows(PeerWith(1000, 1000), "orders/17"));
  EXPECT_FALSE(policy.Allows(PeerWith(1001, 1000), "orders/17")) << "same gid, other uid";
  EXPECT_FALSE(policy.Allows(PeerWith(1001, 1001, {1000}), "orders/17"))
      << "a group with the number of the uid is not the uid";
}

TEST(AccessPolicyAllows, ByPrimaryOrSupplementaryGroup) {
  const AccessPolicy policy = MustBuild({"gid:2001 jobs:"});
  EXPECT_TRUE(policy.Allows(PeerWith(5, 2001), "jobs:1")) << "primary gid";
  EXPECT_TRUE(policy.Allows(PeerWith(5, 5, {7, 2001, 9}), "jobs:1")) << "supplementary group";
  EXPECT_FALSE(policy.Allows(PeerWith(5, 5, {7, 9}), "jobs:1"));
  EXPECT_FALSE(policy.Allows(PeerWith(2001, 5), "jobs:1")) << "a uid with the number of the gid";
  const AccessPolicy named = MustBuild({"group:ops jobs:"});
  EXPECT_TRUE(named.Allows(PeerWith(5, 5, {2001}), "jobs:1"));
  EXPECT_FALSE(named.Allows(PeerWith(5, 5, {2002}), "jobs:1"));
}

TEST(AccessPolicyAllows, AnyMatchesEveryPeerButOnlyItsPrefixes) {
  const AccessPolicy policy = MustBuild({"any public:"});
  EXPECT_TRUE(policy.Allows(PeerWith(1, 1), "public:x"));
  EXPECT_TRUE(policy.Allows(PeerIds{}, "public:x"));
  EXPECT_FALSE(policy.Allows(PeerWith(0, 0), "private:x")) << "not even root beyond the prefix";
}

TEST(AccessPolicyAllows, StarIsEveryResource) {
  const AccessPolicy policy = MustBuild({"user:alice *"});
  EXPECT_TRUE(policy.Allows(PeerWith(1001, 1), "x"));
  EXPECT_TRUE(policy.Allows(PeerWith(1001, 1), "orders/1"));
  EXPECT_FALSE(policy.Allows(PeerWith(1002, 1), "x"));
}

TEST(AccessPolicyAllows, PrefixesMatchFromTheStartExactly) {
  const AccessPolicy policy = MustBuild({"uid:1 orders/ invoices/"});
  const PeerIds peer = PeerWith(1, 1);
  EXPECT_TRUE(policy.Allows(peer, "orders/"));
  EXPECT_TRUE(policy.Allows(peer, "orders/2024/17"));
  EXPECT_TRUE(policy.Allows(peer, "invoices/9"));
  EXPECT_FALSE(policy.Allows(peer, "orders")) << "shorter than the prefix";
  EXPECT_FALSE(policy.Allows(peer, "my-orders/1")) << "not at the start";
  EXPECT_FALSE(policy.Allows(peer, "Orders/1")) << "case matters";
  EXPECT_FALSE(policy.Allows(peer, "ordersX/1"));
}

TEST(AccessPolicyAllows, RulesAddUpAndANonMatchingPeerIsRefused) {
  const AccessPolicy policy = MustBuild({"user:alice orders/", "group:ops *", "uid:1002 reports/"});
  EXPECT_TRUE(policy.Allows(PeerWith(1001, 100), "orders/1"));
  EXPECT_FALSE(policy.Allows(PeerWith(1001, 100), "reports/1")) << "alice has only orders/";
  EXPECT_TRUE(policy.Allows(PeerWith(1001, 100, {2001}), "reports/1")) << "alice in ops";
  EXPECT_TRUE(policy.Allows(PeerWith(1002, 100), "reports/1"));
  EXPECT_FALSE(policy.Allows(PeerWith(1002, 100), "orders/1"));
  EXPECT_FALSE(policy.Allows(PeerWith(3000, 3000, {3001}), "orders/1")) << "matches no rule";
  EXPECT_FALSE(policy.Allows(PeerIds{}, "orders/1")) << "unknown credentials match no id rule";
  EXPECT_FALSE(policy.Allows(PeerWith(0, 0), "orders/1")) << "root is nobody special here";
}

// ---------------------------------------------------------------------------------------------
// AllowsLeases: managing other uids' detached leases.

TEST(AccessPolicyAllowsLeases, NoRulesAllowsNobody) {
  const AccessPolicy open;
  EXPECT_TRUE(open.Allows(PeerWith(0, 0), "x")) << "open for acquire";
  EXPECT_FALSE(open.AllowsLeases(PeerWith(0, 0), "x")) << "but not for other uids' leases";
}

TEST(AccessPolicyAllowsLeases, OnlyRulesWithTheWordAndOnlyTheirPeersAndPrefixes) {
  const AccessPolicy policy =
      MustBuild({"user:alice *", "group:ops jobs/ cron/ +leases", "uid:1002 reports/"});
  const PeerIds alice = PeerWith(1001, 100);
  const PeerIds alice_in_ops = PeerWith(1001, 100, {2001});
  EXPECT_TRUE(policy.Allows(alice, "jobs/1"));
  EXPECT_FALSE(policy.AllowsLeases(alice, "jobs/1")) << "her rule has no +leases";
  EXPECT_TRUE(policy.AllowsLeases(alice_in_ops, "jobs/1"));
  EXPECT_TRUE(policy.AllowsLeases(alice_in_ops, "cron/nightly"));
  EXPECT_FALSE(policy.AllowsLeases(alice_in_ops, "reports/1")) << "outside the rule's prefixes";
  EXPECT_FALSE(policy.AllowsLeases(PeerWith(1002, 100), "jobs/1")) << "not in ops";
  EXPECT_TRUE(policy.Allows(PeerWith(5, 2001), "cron/x")) << "a +leases rule still allows acquire";
  EXPECT_TRUE(policy.AllowsLeases(PeerWith(5, 2001), "cron/x")) << "primary gid";
}

}  // namespace
}  // namespace lw
