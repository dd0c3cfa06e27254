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

}  // namespace
}  // namespace lw::protocol
