// An acquire of several resources at once ("resources", docs/protocol.md) against a real agent
// and masters: granted together in the canonical order with a token each; all or none when one
// is held elsewhere; two such acquires naming the same resources in opposite orders both go
// through (neither waits for the other in a cycle); what is refused as a bad request.

#include <future>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/agent_process.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::multi {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json AcquireAll(client::Client& c, const json& resources, int64_t wait_ms, json extra = {}) {
  json request = {{"op", "acquire"}, {"resources", resources}, {"ttl_ms", 10'000},
                  {"wait_ms", wait_ms}};
  if (extra.is_object()) request.update(extra);
  return c.Call(request);
}

class MultiTest : public ::testing::Test {
 protected:
  RedisCluster cluster_{3};
  AgentProcess agent_{cluster_};
};

TEST_F(MultiTest, SeveralResourcesAreGrantedTogetherInTheCanonicalOrderWithATokenEach) {
  auto c = agent_.Connect();
  const json got = AcquireAll(c, {"m:c", "m:a", "m:b"}, 1'000, {{"fence", true}});
  ASSERT_TRUE(got.value("ok", false)) << got;
  ASSERT_EQ(got["resources"].size(), 3u);
  int64_t least = INT64_MAX;
  for (size_t i = 0; i < 3; ++i) {
    const json& g = got["resources"][i];
    EXPECT_EQ(g["resource"], std::string("m:") + static_cast<char>('a' + i)) << "sorted";
    EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf(g["resource"]), g["token"], 3), 3);
    EXPECT_TRUE(g["fence"].is_number_integer());
    least = std::min<int64_t>(least, g["validity_ms"]);
  }
  EXPECT_EQ(got["validity_ms"], least);
  EXPECT_NE(got["resources"][0]["token"], got["resources"][1]["token"]);
  // Each is an ordinary hold: released by its own token.
  for (const json& g : got["resources"]) {
    EXPECT_TRUE(c.Release(g["resource"], g["token"]).value("ok", false));
  }
  EXPECT_EQ(cluster_.CountHoldingGrant(KeyOf("m:a"), got["resources"][0]["token"]), 0);
}

TEST_F(MultiTest, OneHeldElsewhereMeansNoneIsHeld) {
  auto other = agent_.Connect();
  ASSERT_TRUE(other.Acquire("n:b", 10'000, 0).value("ok", false));
  auto c = agent_.Connect();
  const json refused = AcquireAll(c, {"n:a", "n:b", "n:c"}, 300);
  EXPECT_EQ(refused["error"], "timeout") << refused;
  EXPECT_THAT(refused.value("message", ""), HasSubstr("resources[1] \"n:b\""));
  EXPECT_THAT(refused.value("message", ""), HasSubstr("none of the 3 resources is held"));
  // n:a, taken first, was let go of; n:c was never asked.
  auto d = agent_.Connect();
  EXPECT_TRUE(d.Acquire("n:a", 10'000, 0).value("ok", false));
  EXPECT_TRUE(d.Acquire("n:c", 10'000, 0).value("ok", false));
}

TEST_F(MultiTest, TwoAcquiresOfTheSameResourcesInOppositeOrdersBothGoThrough) {
  // p is held, so both wait; each takes p before q whatever order it named them in, so neither
  // can hold q while waiting for p.
  auto holder = agent_.Connect();
  const json p = holder.Acquire("o:p", 10'000, 0);
  ASSERT_TRUE(p.value("ok", false));
  const auto take = [this](json order) {
    return std::async(std::launch::async, [this, order] {
      auto c = agent_.Connect();
      json got = AcquireAll(c, order, 20'000);
      if (got.value("ok", false)) {
        for (const json& g : got["resources"]) c.Release(g["resource"], g["token"]);
      }
      return got;
    });
  };
  auto first = take({"o:p", "o:q"});
  auto second = take({"o:q", "o:p"});
  ASSERT_TRUE(Eventually(
      [&] {
        const json locks = holder.Call({{"op", "locks"}})["locks"];
        for (const json& l : locks) {
          if (l.value("resource", "") == "o:p" && l.value("waiters", 0) == 2) return true;
        }
        return false;
      },
      std::chrono::milliseconds(10'000)))
      << "both wait for o:p, and neither holds o:q";
  EXPECT_TRUE(holder.Release("o:p", p["token"]).value("ok", false));
  EXPECT_TRUE(first.get().value("ok", false));
  EXPECT_TRUE(second.get().value("ok", false));
}

TEST_F(MultiTest, BadListsAreRefusedNamingWhatIsWrong) {
  auto c = agent_.Connect();
  const auto error_of = [&c](json request) {
    request["op"] = "acquire";
    const json r = c.Call(request);
    return r.value("error", "") + ": " + r.value("message", "");
  };
  EXPECT_THAT(error_of({{"resources", {"x"}}}), HasSubstr("bad_request: field \"resources\" must be"));
  EXPECT_THAT(error_of({{"resources", {"x", "x"}}}), HasSubstr("names \"x\" twice"));
  EXPECT_THAT(error_of({{"resources", {"x", ""}}}), HasSubstr("item 1 is refused"));
  EXPECT_THAT(error_of({{"resources", {"x", "y"}}, {"resource", "x"}}), HasSubstr("not both"));
  EXPECT_THAT(error_of({{"resources", {"x", "y"}}, {"detach", true}}), HasSubstr("\"detach\""));
  EXPECT_THAT(error_of({{"resources", json::array()}}), HasSubstr("bad_request"));
}

}  // namespace
}  // namespace lw::test::multi
