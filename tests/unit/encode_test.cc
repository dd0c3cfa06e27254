// The hot replies (ok, acquired, extended) are written without a JSON tree (encode.cc). Their
// bytes must be exactly what the JSON library writes for the same object, whatever the id and
// strings hold: this builds the reference independently with nlohmann::ordered_json.

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "protocol/messages.h"

namespace lw::protocol {
namespace {

using Ordered = nlohmann::ordered_json;

std::string Reference(const Ordered& line) {
  return line.dump(-1, ' ', false, Ordered::error_handler_t::replace) + "\n";
}

std::vector<nlohmann::json> Ids() {
  return {nlohmann::json(7),
          nlohmann::json(0),
          nlohmann::json(-42),
          nlohmann::json(std::numeric_limits<int64_t>::max()),
          nlohmann::json(std::numeric_limits<int64_t>::min()),
          nlohmann::json(nullptr),
          nlohmann::json("req-1"),
          nlohmann::json(""),
          nlohmann::json("quote \" and backslash \\"),
          nlohmann::json("caf\xc3\xa9 \xf0\x9f\x94\x92"),
          nlohmann::json("tab\there"),
          nlohmann::json("del\x7f")};
}

std::vector<std::string> Strings() {
  return {"db/migrations", "a", "orders:42", "with space", "quote\"", "back\\slash",
          "caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac", "~!@#$%^&*()_+{}|:<>?", "line\nbreak",
          std::string(256, 'x'), "bad \xff utf-8"};
}

Ordered Success(const nlohmann::json& id) {
  Ordered line;
  line["id"] = id;
  line["ok"] = true;
  return line;
}

TEST(HotReplyTest, OkMatchesTheJsonLibrary) {
  for (const auto& id : Ids()) {
    EXPECT_EQ(EncodeOk(id), Reference(Success(id))) << id.dump();
  }
}

TEST(HotReplyTest, AcquiredMatchesTheJsonLibrary) {
  for (const auto& id : Ids()) {
    for (const auto& s : Strings()) {
      for (std::optional<int64_t> fence : {std::optional<int64_t>(), std::optional<int64_t>(9)}) {
        Ordered line = Success(id);
        line["resource"] = s;
        line["token"] = "5f1c0d9e2b7a44c1a08e3f6d9b2c7e1a4d8f0b3c";
        line["validity_ms"] = -3;
        line["waited_ms"] = int64_t{1204};
        if (fence) line["fence"] = *fence;
        EXPECT_EQ(EncodeAcquired(id, s, "5f1c0d9e2b7a44c1a08e3f6d9b2c7e1a4d8f0b3c", -3, 1204, fence),
                  Reference(line))
            << id.dump() << " " << s;
      }
    }
  }
}

TEST(HotReplyTest, ExtendedMatchesTheJsonLibrary) {
  for (const auto& id : Ids()) {
    Ordered line = Success(id);
    line["validity_ms"] = int64_t{29688};
    EXPECT_EQ(EncodeExtended(id, 29688), Reference(line)) << id.dump();
  }
}

TEST(HotReplyTest, ElectedMatchesTheJsonLibrary) {
  for (const auto& id : Ids()) {
    for (const auto& s : Strings()) {
      Ordered line = Success(id);
      line["name"] = s;
      line["term"] = int64_t{7};
      line["token"] = "5f1c0d9e2b7a44c1a08e3f6d9b2c7e1a4d8f0b3c";
      line["validity_ms"] = int64_t{9990};
      line["waited_ms"] = int64_t{3};
      EXPECT_EQ(EncodeElected(id, s, 7, "5f1c0d9e2b7a44c1a08e3f6d9b2c7e1a4d8f0b3c", 9990, 3),
                Reference(line))
          << id.dump() << " " << s;
    }
  }
}

// ---- elections: the candidate payload, the leader reply and event ---------------------------

TEST(LeaderEncodingTest, ACandidatesPayloadReadsBackAsTheLeaderWithTheRecordsTermAndSince) {
  const std::string payload = EncodeCandidate("host-a:8080", "0123456789abcdef", "web-1", 4242);
  EXPECT_EQ(payload,
            R"({"value":"host-a:8080","agent":"0123456789abcdef","host":"web-1","pid":4242})");
  const LeaderView view = LeaderViewOf(ElectionRecord{7, 1714557600123, payload});
  EXPECT_EQ(view.value, "host-a:8080");
  EXPECT_EQ(view.agent, "0123456789abcdef");
  EXPECT_EQ(view.host, "web-1");
  EXPECT_EQ(view.pid, 4242);
  EXPECT_EQ(view.term, 7);
  EXPECT_EQ(view.since_ms, 1714557600123);
}

TEST(LeaderEncodingTest, AnOddPayloadLeavesItsFieldsEmptyButKeepsTermAndSince) {
  for (const std::string payload : {"", "not json", "[1,2]", R"({"value":5,"pid":"x"})"}) {
    const LeaderView view = LeaderViewOf(ElectionRecord{3, 10, payload});
    EXPECT_EQ(view.value, "") << payload;
    EXPECT_EQ(view.agent, "") << payload;
    EXPECT_EQ(view.pid, -1) << payload;
    EXPECT_EQ(view.term, 3) << payload;
    EXPECT_EQ(view.since_ms, 10) << payload;
  }
}

TEST(LeaderEncodingTest, ReplyAndEventCarryTheLeaderOrNull) {
  const LeaderView view{"host-a:8080", "0123456789abcdef", "web-1", 4242, 1714557600123, 7};
  EXPECT_EQ(EncodeLeader(3, "jobs", view),
            R"({"id":3,"ok":true,"name":"jobs","leader":{"value":"host-a:8080",)"
            R"("agent":"0123456789abcdef","host":"web-1","pid":4242,"since":1714557600123,)"
            R"("term":7}})"
            "\n");
  EXPECT_EQ(EncodeLeader(3, "jobs", std::nullopt),
            R"({"id":3,"ok":true,"name":"jobs","leader":null})" "\n");
  EXPECT_EQ(EncodeLeaderEvent("jobs", std::nullopt, 7, true),
            R"({"event":"leader","name":"jobs","leader":null,"term":7,"missed":true})" "\n");
  const auto event = nlohmann::json::parse(EncodeLeaderEvent("jobs", view, 8, false));
  EXPECT_EQ(event["leader"]["value"], "host-a:8080");
  EXPECT_EQ(event["term"], 8);
  EXPECT_EQ(event["missed"], false);
}

}  // namespace
}  // namespace lw::protocol
