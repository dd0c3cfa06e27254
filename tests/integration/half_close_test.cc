// End of input (docs/protocol.md "Transport"): a client that shuts down its writing side, as
// `echo ... | socat - UNIX-CONNECT:...` does, gets the answer to every request it sent, waits
// included, then the session ends and its locks are released; a client that closes its socket
// entirely is gone at once. Real agent, real masters, raw sockets.

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "support/agent_process.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::half_close {
namespace {

using lw::client::Client;
using nlohmann::json;

constexpr milliseconds kAwait{20'000};

// Every line the agent writes until it closes the connection; fails the test if it does not
// close it within kAwait.
std::vector<json> LinesUntilEnd(int fd) {
  std::vector<json> lines;
  std::string buffer;
  const auto deadline = SteadyClock::now() + kAwait;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) {
      ADD_FAILURE() << "the agent did not end the session; read so far: " << buffer;
      return lines;
    }
    char chunk[4096];
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
  }
  for (size_t at = 0, nl; (nl = buffer.find('\n', at)) != std::string::npos; at = nl + 1) {
    lines.push_back(json::parse(buffer.substr(at, nl - at)));
  }
  return lines;
}

std::string Line(json request) { return request.dump() + "\n"; }

json Acquire(const std::string& id, const std::string& resource, int64_t wait_ms) {
  return {{"id", id}, {"op", "acquire"}, {"resource", resource}, {"ttl_ms", 30'000},
          {"wait_ms", wait_ms}};
}

class HalfCloseTest : public ::testing::Test {
 protected:
  // Waiters on `resource` that the agent lists (its `locks` op).
  int Waiters(const std::string& resource) {
    const json reply = agent_.Connect().Call({{"op", "locks"}});
    for (const auto& l : reply["locks"]) {
      if (l.value("resource", "") == resource) return l.value("waiters", 0);
    }
    return 0;
  }
  // True once another client can take `resource` (waiting for it up to kAwait).
  bool Free(const std::string& resource) {
    Client c = agent_.Connect();
    const json r = c.Acquire(resource, 5'000, kAwait.count());
    return r.value("ok", false) && c.Release(resource, r["token"]).value("ok", false);
  }

  RedisCluster cluster_{3};
  AgentProcess agent_{cluster_};
};

TEST_F(HalfCloseTest, EveryRequestSentBeforeEndOfInputIsAnsweredThenTheLocksAreReleased) {
  Client c = agent_.Connect();
  c.SendRaw(Line({{"id", 1}, {"op", "ping"}}) + Line(Acquire("a", "hc:one", 5'000)) +
            Line({{"id", 3}, {"op", "held"}}));
  ASSERT_EQ(shutdown(c.fd(), SHUT_WR), 0);

  const std::vector<json> lines = LinesUntilEnd(c.fd());
  ASSERT_EQ(lines.size(), 3u) << json(lines);
  std::set<std::string> ids;  // in the order they finish (docs/protocol.md)
  for (const auto& l : lines) {
    EXPECT_TRUE(l.value("ok", false)) << l;
    ids.insert(l["id"].dump());
  }
  EXPECT_EQ(ids, (std::set<std::string>{"1", "\"a\"", "3"}));
  // Ended: the lock it was granted is released everywhere.
  EXPECT_TRUE(Eventually([&] { return cluster_.CountWithKey(KeyOf("hc:one")) == 0; }, kAwait));
}

TEST_F(HalfCloseTest, AWaitAfterEndOfInputIsAnsweredWhenTheLockFreesThenReleased) {
  Client holder = agent_.Connect();
  const json held = holder.Acquire("hc:busy", 60'000, 30'000);
  ASSERT_TRUE(held.value("ok", false)) << held;
  Client waiter = agent_.Connect();
  waiter.SendRaw(Line(Acquire("w", "hc:busy", 60'000)));
  ASSERT_EQ(shutdown(waiter.fd(), SHUT_WR), 0);
  ASSERT_TRUE(Eventually([&] { return Waiters("hc:busy") == 1; }, kAwait));
  ASSERT_TRUE(Eventually([&] { return agent_.Log().find("end of input") != std::string::npos; },
                         kAwait));

  ASSERT_TRUE(holder.Release("hc:busy", held["token"]).value("ok", false));
  const std::vector<json> lines = LinesUntilEnd(waiter.fd());
  ASSERT_EQ(lines.size(), 1u) << json(lines);
  EXPECT_TRUE(lines[0].value("ok", false)) << lines[0];
  EXPECT_EQ(lines[0].value("id", ""), "w");
  // Granted after the half-close: released when the session ended, after the grant was written.
  EXPECT_TRUE(Free("hc:busy"));
}

TEST_F(HalfCloseTest, AWaitThatRunsOutAfterEndOfInputIsAnsweredTimeout) {
  Client holder = agent_.Connect();
  ASSERT_TRUE(holder.Acquire("hc:taken", 60'000, 30'000).value("ok", false));
  Client waiter = agent_.Connect();
  waiter.SendRaw(Line(Acquire("t", "hc:taken", 200)));
  ASSERT_EQ(shutdown(waiter.fd(), SHUT_WR), 0);
  const std::vector<json> lines = LinesUntilEnd(waiter.fd());
  ASSERT_EQ(lines.size(), 1u) << json(lines);
  EXPECT_EQ(lines[0].value("error", ""), "timeout") << lines[0];
}

TEST_F(HalfCloseTest, BytesAfterTheLastNewlineAreNotARequest) {
  Client c = agent_.Connect();
  c.SendRaw(Line({{"id", 1}, {"op", "ping"}}) + json{{"id", 2}, {"op", "ping"}}.dump());
  ASSERT_EQ(shutdown(c.fd(), SHUT_WR), 0);
  const std::vector<json> lines = LinesUntilEnd(c.fd());
  ASSERT_EQ(lines.size(), 1u) << json(lines);
  EXPECT_EQ(lines[0].value("id", 0), 1);
}

// The crash-release promise: a client that closes its socket (or dies) while a wait of its is
// in flight loses its locks at once, not when the wait ends. The wait (300 s, the agent's
// max_wait_ms) outlasts the other client's (kAwait): the other gets the lock only if the session
// ended first.
TEST_F(HalfCloseTest, AClientThatClosesItsSocketLosesItsLocksAtOnce) {
  Client holder = agent_.Connect();
  const json busy = holder.Acquire("hc:elsewhere", 60'000, 30'000);
  ASSERT_TRUE(busy.value("ok", false)) << busy;
  // Closed first: the half-closed case awaits the only "end of input" line of the agent's log.
  for (bool half_closed_first : {false, true}) {
    SCOPED_TRACE(half_closed_first ? "shut down for writing, then closed" : "closed");
    Client gone = agent_.Connect();
    ASSERT_TRUE(gone.Acquire("hc:mine", 60'000, 30'000).value("ok", false));
    gone.SendRaw(Line(Acquire("x", "hc:elsewhere", 300'000)));
    ASSERT_TRUE(Eventually([&] { return Waiters("hc:elsewhere") == 1; }, kAwait));
    if (half_closed_first) {
      ASSERT_EQ(shutdown(gone.fd(), SHUT_WR), 0);
      ASSERT_TRUE(Eventually(
          [&] { return agent_.Log().find("end of input") != std::string::npos; }, kAwait));
    }
    gone.Close();
    EXPECT_TRUE(Free("hc:mine"));
    EXPECT_TRUE(Eventually([&] { return Waiters("hc:elsewhere") == 0; }, kAwait));
  }
}

}  // namespace
}  // namespace lw::test::half_close
