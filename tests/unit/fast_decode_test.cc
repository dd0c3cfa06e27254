// Unit tests for protocol::DecodeHotRequest: it takes the acquire and release lines the clients
// send, every Request it returns is the one DecodeRequest returns for the same line, and it
// declines (nullopt) every line it is not certain of, valid or not.

#include "protocol/fast_decode.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "protocol/messages.h"
#include "support/request_json.h"

// Helpers live in a namespace of this file's own: test files are compiled in batches.
namespace lw::protocol::fast_decode_test {
namespace {

using nlohmann::json;

const Limits kLimits;  // the defaults: ttl 100..60000 (30000), wait 0..300000
const std::string kToken = "0123456789abcdef0123456789abcdef01234567";

// Valid Limits other than the defaults (min <= default <= max), as the fuzz target uses.
const Limits kOtherLimits[] = {
    {1, 1, 1, 0},
    {1000, 1000, 1000, 86'400'000},
    {1, 604'800'000, 604'800'000, 1},
};

// The fast path's answer for a line, checked against the strict decoder's: when it returns a
// Request, DecodeRequest returns the same one.
std::optional<Request> FastAgreeing(std::string_view line, const Limits& limits = kLimits) {
  auto fast = DecodeHotRequest(line, limits);
  if (!fast) return fast;
  const auto strict = DecodeRequest(line, limits);
  if (const auto* error = std::get_if<DecodeError>(&strict)) {
    ADD_FAILURE() << "the fast path accepted " << line << " as " << test::RequestText(*fast)
                  << "; the strict decoder refused it: " << error->message;
  } else if (!test::SameRequest(*fast, std::get<Request>(strict))) {
    ADD_FAILURE() << "decoders disagree on " << line << "\n  fast:   " << test::RequestText(*fast)
                  << "\n  strict: " << test::RequestText(std::get<Request>(strict));
  }
  return fast;
}

Request MustAccept(std::string_view line, const Limits& limits = kLimits) {
  auto fast = FastAgreeing(line, limits);
  if (!fast) {
    ADD_FAILURE() << "the fast path declined " << line;
    return {};
  }
  return *fast;
}

// ---- The lines the clients send -----------------------------------------------------------

TEST(FastDecodeTest, AcceptsTheLinesTheClientsSend) {
  const std::vector<std::string> lines = {
      // Python (json.dumps: ", " and ": " separators, id and op first).
      R"({"id": 1, "op": "acquire", "resource": "orders", "wait_ms": 0})",
      R"({"id": 2, "op": "acquire", "resource": "orders", "wait_ms": 500, "ttl_ms": 30000, "renew": true, "fence": true})",
      R"({"id": 3, "op": "acquire", "resource": "pool", "wait_ms": 0, "permits": 4})",
      R"({"id": 4, "op": "acquire", "resource": "doc", "wait_ms": 0, "shared": true})",
      R"({"id": 5, "op": "acquire", "resource": "job", "wait_ms": 0, "ttl_ms": 5000, "detach": true})",
      R"({"id": 6, "op": "release", "resource": "orders", "token": ")" + kToken + R"("})",
      // Node (JSON.stringify: compact, id and op first).
      R"({"id":7,"op":"acquire","resource":"orders","wait_ms":0,"ttl_ms":30000})",
      R"({"id":8,"op":"release","resource":"orders","token":")" + kToken + R"("})",
      // Go (json.Marshal of a map: compact, keys sorted).
      R"({"fence":true,"id":9,"op":"acquire","renew":true,"resource":"orders","ttl_ms":30000,"wait_ms":0})",
      R"({"id":10,"op":"release","resource":"orders","token":")" + kToken + R"("})",
      // bench/lw_bench.cc and bench/hold.cc (negative ids on release).
      R"({"id":11,"op":"acquire","resource":"bench-7","ttl_ms":10000,"wait_ms":2000})",
      R"({"id":12,"op":"acquire","resource":"hold-3","ttl_ms":10000,"wait_ms":0,"renew":true})",
      R"({"id":-3,"op":"release","resource":"hold-3","token":")" + kToken + R"("})",
  };
  for (const auto& line : lines) MustAccept(line);

  // src/client/client.cc: a nlohmann object dumped (keys sorted), id added last.
  json acquire = {{"op", "acquire"}, {"resource", "orders"}, {"wait_ms", 0}, {"renew", false}};
  acquire["ttl_ms"] = 30000;
  acquire["id"] = 13;
  MustAccept(acquire.dump());
  json release = {{"op", "release"}, {"resource", "orders"}, {"token", kToken}};
  release["id"] = 14;
  MustAccept(release.dump());
}

// ---- What it reads -------------------------------------------------------------------------

TEST(FastDecodeTest, ReadsEveryAcquireField) {
  const Request request =
      MustAccept(R"({"id":"a-1","op":"acquire","resource":"r/1","ttl_ms":1500,"wait_ms":250,)"
                 R"("renew":true,"fence":true,"permits":3,"detach":false})");
  ASSERT_TRUE(std::holds_alternative<AcquireRequest>(request.op));
  const auto& acquire = std::get<AcquireRequest>(request.op);
  EXPECT_EQ(request.id, json("a-1"));
  EXPECT_EQ(acquire.resource, "r/1");
  EXPECT_EQ(acquire.ttl_ms, 1500);
  EXPECT_EQ(acquire.wait_ms, 250);
  EXPECT_TRUE(acquire.renew);
  EXPECT_TRUE(acquire.fence);
  EXPECT_EQ(acquire.permits, 3);
  EXPECT_FALSE(acquire.shared);
  EXPECT_FALSE(acquire.detach);

  const Request shared = MustAccept(R"({"op":"acquire","resource":"doc","shared":true})");
  EXPECT_TRUE(std::get<AcquireRequest>(shared.op).shared);
  const Request detached =
      MustAccept(R"({"op":"acquire","resource":"job","detach":true,"renew":false})");
  EXPECT_TRUE(std::get<AcquireRequest>(detached.op).detach);
}

TEST(FastDecodeTest, AbsentFieldsTakeTheLimitsDefaults) {
  std::vector<Limits> all = {kLimits};
  all.insert(all.end(), std::begin(kOtherLimits), std::end(kOtherLimits));
  for (const Limits& limits : all) {
    const Request request = MustAccept(R"({"op":"acquire","resource":"r"})", limits);
    EXPECT_TRUE(request.id.is_null());
    ASSERT_TRUE(std::holds_alternative<AcquireRequest>(request.op));
    const auto& acquire = std::get<AcquireRequest>(request.op);
    EXPECT_EQ(acquire.ttl_ms, limits.default_ttl_ms);
    EXPECT_EQ(acquire.wait_ms, 0);
    EXPECT_EQ(acquire.permits, 0);
    EXPECT_FALSE(acquire.renew || acquire.fence || acquire.shared || acquire.detach);
  }
}

TEST(FastDecodeTest, ReadsReleaseAndIds) {
  const Request request = MustAccept(R"({"op":"release","token":")" + kToken +
                                     R"(","resource":"a b","id":9223372036854775807})");
  ASSERT_TRUE(std::holds_alternative<ReleaseRequest>(request.op));
  EXPECT_EQ(std::get<ReleaseRequest>(request.op).resource, "a b");
  EXPECT_EQ(std::get<ReleaseRequest>(request.op).token, kToken);
  EXPECT_EQ(request.id, json(INT64_MAX));
  EXPECT_FALSE(request.id.is_number_unsigned());

  EXPECT_EQ(MustAccept(R"({"id":-9223372036854775807,"op":"acquire","resource":"r"})").id,
            json(-INT64_MAX));
  EXPECT_EQ(MustAccept(R"({"id":0,"op":"acquire","resource":"r"})").id, json(0));
  const std::string long_id(128, 'x');  // the longest id the strict decoder takes
  EXPECT_EQ(MustAccept(R"({"id":")" + long_id + R"(","op":"acquire","resource":"r"})").id,
            json(long_id));
  EXPECT_EQ(MustAccept(R"({"id":"","op":"acquire","resource":"r"})").id, json(""));
}

TEST(FastDecodeTest, TakesJsonWhitespaceAnywhereBetweenTokens) {
  const std::vector<std::string> tokens = {
      "{", R"("resource")", ":", R"("r")", ",", R"("op")",    ":", R"("acquire")",
      ",", R"("wait_ms")",  ":", "10",     ",", R"("renew")", ":", "true",
      ",", R"("id")",       ":", "-5",     "}"};
  for (const std::string space : {" ", "\t", "\r\n", "\n", " \t\r\n "}) {
    std::string line = space;
    for (const auto& token : tokens) line += token + space;
    const Request request = MustAccept(line);
    EXPECT_EQ(request.id, json(-5));
    EXPECT_EQ(std::get<AcquireRequest>(request.op).wait_ms, 10);
  }
}

TEST(FastDecodeTest, TakesKeysInAnyOrder) {
  std::vector<std::string> fields = {R"("id":4)", R"("op":"release")", R"("resource":"r")",
                                     R"("token":")" + kToken + "\""};
  std::sort(fields.begin(), fields.end());
  int orders = 0;
  do {
    std::string line = "{";
    for (const auto& field : fields) line += (line.size() > 1 ? "," : "") + field;
    MustAccept(line + "}");
    ++orders;
  } while (std::next_permutation(fields.begin(), fields.end()));
  EXPECT_EQ(orders, 24);
}

// ---- What it leaves to the strict decoder --------------------------------------------------

struct Declined {
  std::string line;
  bool valid;  // what the strict decoder makes of it: a request (true) or an error
};

// Lines the fast path must decline, and what the strict decoder (which then decodes them) says.
std::vector<Declined> DeclinedLines() {
  const std::string t = kToken;
  const std::string acq = R"({"id":1,"op":"acquire","resource":"r")";  // + more fields + "}"
  return {
      // Valid, but not the fast path's: escapes, non-ASCII, null, -0, a BOM, other ops...
      {R"({"id":1,"op":"acquire","resource":"a\u0062"})", true},
      {R"({"id":1,"op":"acquire","resource":"a\/b"})", true},
      {R"({"id":1,"\u006fp":"acquire","resource":"r"})", true},
      {R"({"id":1,"op":"acq\u0075ire","resource":"r"})", true},
      {R"({"id":"a\"b","op":"acquire","resource":"r"})", true},
      {R"({"id":1,"op":"release","resource":"r","token":"\u0030)" + t.substr(1) + "\"}", true},
      {"{\"id\":1,\"op\":\"acquire\",\"resource\":\"caf\xc3\xa9\"}", true},
      {"{\"id\":\"\xc3\xa9\",\"op\":\"acquire\",\"resource\":\"r\"}", true},
      {"{\"id\":\"x\x7f\",\"op\":\"acquire\",\"resource\":\"r\"}", true},
      {R"({"id":null,"op":"acquire","resource":"r"})", true},
      {R"({"id":-0,"op":"acquire","resource":"r"})", true},
      {acq + R"(,"wait_ms":-0})", true},
      {R"({"id":-9223372036854775808,"op":"acquire","resource":"r"})", true},
      {"\xef\xbb\xbf" + acq + "}", true},
      {acq + std::string("}\0x", 3), true},  // nlohmann reads a NUL byte as the end of input
      {R"({"id":1,"op":"ping"})", true},
      {R"({"op":"held"})", true},
      {R"({"op":"extend","resource":"r","token":")" + t + R"(","ttl_ms":1000})", true},
      // Duplicate and unknown fields.
      {R"({"op":"acquire","op":"acquire","resource":"r"})", false},
      {acq + R"(,"resource":"s"})", false},
      {R"({"id":1,"id":1,"op":"release","resource":"r","token":")" + t + "\"}", false},
      {acq + R"(,"ttl":1000})", false},
      {acq + R"(,"token":")" + t + "\"}", false},
      {acq + R"(,"name":"x"})", false},
      {R"({"op":"release","resource":"r","token":")" + t + R"(","ttl_ms":1000})", false},
      // Numbers that are not plain int64 integers.
      {acq + R"(,"ttl_ms":1000.0})", false},
      {acq + R"(,"ttl_ms":1000.5})", false},
      {acq + R"(,"ttl_ms":1e3})", false},
      {acq + R"(,"ttl_ms":1E3})", false},
      {acq + R"(,"ttl_ms":01000})", false},
      {acq + R"(,"wait_ms":+5})", false},
      {acq + R"(,"wait_ms":-})", false},
      {acq + R"(,"ttl_ms":9223372036854775808})", false},
      {R"({"id":1.0,"op":"acquire","resource":"r"})", false},
      {R"({"id":007,"op":"acquire","resource":"r"})", false},
      {R"({"id":9223372036854775808,"op":"acquire","resource":"r"})", false},
      {R"({"id":")" + std::string(129, 'x') + R"(","op":"acquire","resource":"r"})", false},
      // Values of the wrong type: null, nested, strings for numbers...
      {acq + R"(,"renew":null})", false},
      {acq + R"(,"ttl_ms":null})", false},
      {acq + R"(,"renew":"true"})", false},
      {acq + R"(,"renew":1})", false},
      {acq + R"(,"renew":[true]})", false},
      {acq + R"(,"ttl_ms":"1000"})", false},
      {R"({"id":1,"op":"acquire","resource":{"a":1}})", false},
      {R"({"id":[1],"op":"acquire","resource":"r"})", false},
      {R"({"id":true,"op":"acquire","resource":"r"})", false},
      {R"({"id":1,"op":5,"resource":"r"})", false},
      {R"({"id":1,"op":"acquire","resource":5})", false},
      {R"({"op":"release","resource":"r","token":5})", false},
      // Out of range (the default Limits: ttl 100..60000, wait 0..300000).
      {acq + R"(,"ttl_ms":99})", false},
      {acq + R"(,"ttl_ms":60001})", false},
      {acq + R"(,"wait_ms":-1})", false},
      {acq + R"(,"wait_ms":300001})", false},
      {acq + R"(,"permits":0})", false},
      {acq + R"(,"permits":-1})", false},
      {acq + R"(,"permits":1025})", false},
      // Resources and tokens the strict decoder refuses.
      {R"({"id":1,"op":"acquire","resource":""})", false},
      {"{\"id\":1,\"op\":\"acquire\",\"resource\":\"\x7f\"}", false},
      {"{\"id\":1,\"op\":\"acquire\",\"resource\":\"a\tb\"}", false},
      {R"({"id":1,"op":"acquire","resource":")" + std::string(257, 'a') + "\"}", false},
      {R"({"op":"release","resource":"r","token":"0123"})", false},
      {R"({"op":"release","resource":"r","token":"0123456789ABCDEF0123456789ABCDEF01234567"})",
       false},
      // Combinations the strict decoder refuses.
      {acq + R"(,"permits":2,"shared":false})", false},
      {acq + R"(,"fence":true,"shared":true})", false},
      {acq + R"(,"detach":true,"renew":true})", false},
      // Missing fields, unknown ops.
      {R"({"id":1,"resource":"r"})", false},
      {R"({"op":"acquire"})", false},
      {R"({"op":"release","resource":"r"})", false},
      {R"({"op":"release","token":")" + t + "\"}", false},
      {R"({"op":"acquired","resource":"r"})", false},
      {R"({"op":"ACQUIRE","resource":"r"})", false},
      // Not one JSON object.
      {"", false},
      {"{}", false},
      {"[]", false},
      {acq, false},
      {acq + ",}", false},
      {acq + "}}", false},
      {acq + "}x", false},
      {acq + "}{}", false},
      {acq + "},", false},
      {R"({"op":"acquire" "resource":"r"})", false},
      {acq + R"(,"renew":tru})", false},
      {acq + R"(,"renew":truex})", false},
      {R"({"id":1,"op":"acquire","resource":"r)", false},
      {"/**/" + acq + "}", false},
  };
}

TEST(FastDecodeTest, DeclinesWhatItIsNotCertainOf) {
  for (const auto& [line, valid] : DeclinedLines()) {
    EXPECT_FALSE(DecodeHotRequest(line, kLimits).has_value()) << "accepted " << line;
    EXPECT_EQ(std::holds_alternative<Request>(DecodeRequest(line, kLimits)), valid)
        << "the strict decoder's verdict on " << line << " is not the one this table expects";
  }
}

TEST(FastDecodeTest, AppliesTheLimitsItIsGiven) {
  // Within the defaults, outside these (ttl 1000 only, no waiting).
  const Limits narrow = kOtherLimits[1];
  ASSERT_EQ(narrow.max_ttl_ms, 1000);
  const Limits no_wait = kOtherLimits[0];
  ASSERT_EQ(no_wait.max_wait_ms, 0);
  const std::string ttl = R"({"op":"acquire","resource":"r","ttl_ms":5000})";
  const std::string wait = R"({"op":"acquire","resource":"r","wait_ms":1})";
  MustAccept(ttl);
  MustAccept(wait);
  EXPECT_FALSE(DecodeHotRequest(ttl, narrow).has_value());
  EXPECT_FALSE(DecodeHotRequest(wait, no_wait).has_value());
  EXPECT_TRUE(std::holds_alternative<DecodeError>(DecodeRequest(ttl, narrow)));
  EXPECT_TRUE(std::holds_alternative<DecodeError>(DecodeRequest(wait, no_wait)));
}

// ---- Agreement beyond the tables -----------------------------------------------------------

// Seeded mutations of accepted lines (a piece replaced, inserted or removed, up to three times):
// whatever the fast path accepts of them, the strict decoder decodes the same.
TEST(FastDecodeTest, AgreesWithTheStrictDecoderOnMutatedLines) {
  const std::vector<std::string> bases = {
      R"({"id": 1, "op": "acquire", "resource": "orders", "wait_ms": 0, "ttl_ms": 30000})",
      R"({"id":2,"op":"acquire","resource":"a","ttl_ms":100,"renew":true,"fence":true})",
      R"({"op":"acquire","resource":"p","permits":2,"detach":true,"id":"x"})",
      R"({"op":"acquire","resource":"s","shared":true,"wait_ms":300000})",
      R"({"id":-7,"op":"release","resource":"orders","token":")" + kToken + R"("})",
  };
  const std::vector<std::string> pieces = {"{",
                                           "}",
                                           "[",
                                           "]",
                                           "\"",
                                           ":",
                                           ",",
                                           "\\",
                                           " ",
                                           "\t",
                                           "\r\n",
                                           "-",
                                           "+",
                                           ".",
                                           "0",
                                           "1",
                                           "9",
                                           "e",
                                           "E",
                                           "true",
                                           "false",
                                           "null",
                                           "-0",
                                           "1e3",
                                           "\"id\"",
                                           "\"op\"",
                                           "\"ttl_ms\"",
                                           "\"wait_ms\"",
                                           "\"permits\"",
                                           "\"shared\"",
                                           "\"fence\"",
                                           "\"renew\"",
                                           "\"detach\"",
                                           "\"token\"",
                                           "\"resource\"",
                                           "\"release\"",
                                           "\"acquire\"",
                                           "\"extend\"",
                                           "60000",
                                           "60001",
                                           "9223372036854775807",
                                           "9223372036854775808",
                                           "\x7f",
                                           "\xc3\xa9",
                                           "\xef\xbb\xbf",
                                           std::string(1, '\0')};
  std::mt19937 rng(21);
  const auto pick = [&rng](size_t n) { return static_cast<size_t>(rng() % n); };
  int accepted = 0;
  int declined = 0;
  for (int i = 0; i < 50000; ++i) {
    std::string line = bases[pick(bases.size())];
    for (size_t edits = 1 + pick(3); edits > 0; --edits) {
      const size_t at = pick(line.size() + 1);
      const std::string& piece = pieces[pick(pieces.size())];
      switch (pick(3)) {
        case 0:  // replace the bytes there
          line.replace(at, piece.size(), piece);
          break;
        case 1:
          line.insert(at, piece);
          break;
        default:  // remove a few bytes
          line.erase(at, 1 + pick(4));
          break;
      }
    }
    const Limits& limits = i % 2 == 0 ? kLimits : kOtherLimits[pick(std::size(kOtherLimits))];
    (FastAgreeing(line, limits) ? accepted : declined)++;
  }
  // Both outcomes occur often, so neither side of the comparison goes untested.
  EXPECT_GT(accepted, 500);
  EXPECT_GT(declined, 10000);
}

}  // namespace
}  // namespace lw::protocol::fast_decode_test
