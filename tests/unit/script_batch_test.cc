// ScriptBatch's encoding: RESP that a master reads as the command the header says (one call:
// that call's own script; several: the batch script with every call's keys first, then each
// call's index, counts and arguments). What a master answers is checked against a real one in
// tests/integration/script_batch_test.cc.

#include "redis/script_batch.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace lw {
namespace {

// The bulk strings of one RESP array command, in order; fails the test on malformed input.
std::vector<std::string> Words(std::string_view resp) {
  std::vector<std::string> words;
  size_t pos = 0;
  auto line = [&]() {
    const size_t end = resp.find("\r\n", pos);
    EXPECT_NE(end, std::string_view::npos);
    std::string_view l = resp.substr(pos, end - pos);
    pos = end + 2;
    return l;
  };
  const std::string_view head = line();
  EXPECT_EQ(head[0], '*');
  const size_t n = std::stoul(std::string(head.substr(1)));
  for (size_t i = 0; i < n; ++i) {
    const std::string_view len = line();
    EXPECT_EQ(len[0], '$');
    const size_t size = std::stoul(std::string(len.substr(1)));
    words.emplace_back(resp.substr(pos, size));
    pos += size;
    EXPECT_EQ(resp.substr(pos, 2), "\r\n");
    pos += 2;
  }
  EXPECT_EQ(pos, resp.size()) << "bytes after the command";
  return words;
}

using V = std::vector<std::string_view>;

TEST(ScriptBatchTest, OneCallIsItsOwnScript) {
  ScriptBatch b;
  const V keys = {"lock:a"}, args = {"agent:t", "lockwarden:released:lock:a"};
  b.Add(0, keys, args);
  EXPECT_EQ(b.size(), 1u);
  EXPECT_EQ(b.first_index(), 0u);
  EXPECT_EQ(Words(b.Command("EVALSHA", "sha0")),
            (std::vector<std::string>{"EVALSHA", "sha0", "1", "lock:a", "agent:t",
                                      "lockwarden:released:lock:a"}));
}

TEST(ScriptBatchTest, SeveralCallsPutEveryKeyFirstThenEachCallsHeaderAndArguments) {
  ScriptBatch b;
  const V k1 = {"lock:a"}, a1 = {"agent:t", "500"};
  const V k2 = {"lock:b", "fence:b"}, a2 = {"agent:u", "7"};
  const V k3 = {}, a3 = {"x\r\n$3\r\n", ""};  // binary-safe: RESP framing inside a word
  b.Add(1, k1, a1);
  b.Add(2, k2, a2);
  b.Add(11, k3, a3);
  EXPECT_EQ(b.size(), 3u);
  EXPECT_EQ(b.first_index(), 1u);
  EXPECT_EQ(Words(b.Command("EVAL", "body")),
            (std::vector<std::string>{"EVAL", "body", "3", "lock:a", "lock:b", "fence:b",
                                      "1", "1", "2", "agent:t", "500",
                                      "2", "2", "2", "agent:u", "7",
                                      "11", "0", "2", "x\r\n$3\r\n", ""}));
}

TEST(ScriptBatchTest, ClearStartsAnEmptyBatchWhoseFirstCallIsItsOwnScriptAgain) {
  ScriptBatch b;
  const V k = {"lock:a"}, a = {"v"};
  b.Add(3, k, a);
  b.Add(4, k, a);
  b.Clear();
  EXPECT_TRUE(b.empty());
  const V k2 = {"lock:z"}, a2 = {"w", "1"};
  b.Add(5, k2, a2);
  EXPECT_EQ(Words(b.Command("EVALSHA", "s")),
            (std::vector<std::string>{"EVALSHA", "s", "1", "lock:z", "w", "1"}));
}

TEST(ScriptBatchTest, TheBatchScriptWrapsEveryBodyInOrder) {
  const char* bodies[] = {"return 1", "return KEYS[1]"};
  const std::string s = BatchScriptBody(bodies);
  const size_t first = s.find("function(KEYS, ARGV) return 1 end");
  const size_t second = s.find("function(KEYS, ARGV) return KEYS[1] end");
  ASSERT_NE(first, std::string::npos);
  ASSERT_NE(second, std::string::npos);
  EXPECT_LT(first, second);
}

}  // namespace
}  // namespace lw
