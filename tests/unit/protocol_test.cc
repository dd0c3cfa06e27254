// Unit tests for src/protocol: request decoding (happy paths, defaults, every refusal) and
// reply/event encoding (exact shapes, one line each, round trips).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "protocol/messages.h"
#include "decode_helpers.h"

namespace lw::protocol {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using namespace decode_helpers;

const json kAcquire = {{"id", 1}, {"op", "acquire"}, {"resource", "db"}};
const json kRelease = {{"id", 2}, {"op", "release"}, {"resource", "db"}, {"token", kToken}};
const json kExtend = {{"id", 3}, {"op", "extend"}, {"resource", "db"}, {"token", kToken}};

// ---- happy paths ----------------------------------------------------------------------------

TEST(DecodeTest, AcquireWithEveryField) {
  const Request request = MustDecode(R"({"id":7,"op":"acquire","resource":"db/migrations",)"
                                     R"("ttl_ms":5000,"wait_ms":1000,"renew":true})");
  EXPECT_EQ(request.id, json(7));
  ASSERT_TRUE(std::holds_alternative<AcquireRequest>(request.op));
  const auto& acquire = std::get<AcquireRequest>(request.op);
  EXPECT_EQ(acquire.resource, "db/migrations");
  EXPECT_EQ(acquire.ttl_ms, 5000);
  EXPECT_EQ(acquire.wait_ms, 1000);
  EXPECT_TRUE(acquire.renew);
}

TEST(DecodeTest, AcquireDefaults) {
  const auto acquire = MustDecodeAs<AcquireRequest>(R"({"op":"acquire","resource":"r"})");
  EXPECT_EQ(acquire.ttl_ms, 30'000);
  EXPECT_EQ(acquire.wait_ms, 0);
  EXPECT_FALSE(acquire.renew);
}

TEST(DecodeTest, AcquireDefaultTtlComesFromLimits) {
  Limits limits;
  limits.default_ttl_ms = 12'345;
  const auto acquire = MustDecodeAs<AcquireRequest>(R"({"op":"acquire","resource":"r"})", limits);
  EXPECT_EQ(acquire.ttl_ms, 12'345);
}

TEST(DecodeTest, AcquireAcceptsTheBoundsThemselves) {
  EXPECT_EQ(MustDecodeAs<AcquireRequest>(With(kAcquire, "ttl_ms", 100)).ttl_ms, 100);
  EXPECT_EQ(MustDecodeAs<AcquireRequest>(With(kAcquire, "ttl_ms", 60'000)).ttl_ms, 60'000);
  EXPECT_EQ(MustDecodeAs<AcquireRequest>(With(kAcquire, "wait_ms", 0)).wait_ms, 0);
  EXPECT_EQ(MustDecodeAs<AcquireRequest>(With(kAcquire, "wait_ms", 300'000)).wait_ms, 300'000);
  EXPECT_FALSE(MustDecodeAs<AcquireRequest>(With(kAcquire, "renew", false)).renew);
}

TEST(DecodeTest, FieldOrderAndWhitespaceDoNotMatter) {
  const auto acquire = MustDecodeAs<AcquireRequest>(
      " \t{ \"renew\" : true , \"resource\" : \"r\" , \"op\" : \"acquire\" }  ");
  EXPECT_EQ(acquire.resource, "r");
  EXPECT_TRUE(acquire.renew);
}

TEST(DecodeTest, ToleratesCarriageReturnFromCrlfClients) {
  MustDecodeAs<PingRequest>("{\"op\":\"ping\"}\r");
}

TEST(DecodeTest, Release) {
  const Request request = MustDecode(kRelease.dump());
  EXPECT_EQ(request.id, json(2));
  ASSERT_TRUE(std::holds_alternative<ReleaseRequest>(request.op));
  EXPECT_EQ(std::get<ReleaseRequest>(request.op).resource, "db");
  EXPECT_EQ(std::get<ReleaseRequest>(request.op).token, kToken);
}

TEST(DecodeTest, ExtendWithTtl) {
  const auto extend = MustDecodeAs<ExtendRequest>(With(kExtend, "ttl_ms", 9000));
  EXPECT_EQ(extend.resource, "db");
  EXPECT_EQ(extend.token, kToken);
  EXPECT_EQ(extend.ttl_ms, 9000);
}

TEST(DecodeTest, ExtendDefaultsToDefaultTtl) {
  EXPECT_EQ(MustDecodeAs<ExtendRequest>(kExtend.dump()).ttl_ms, 30'000);
}

TEST(DecodeTest, BareOps) {
  EXPECT_EQ(MustDecode(R"({"id":"h","op":"held"})").id, json("h"));
  MustDecodeAs<HeldRequest>(R"({"op":"held"})");
  MustDecodeAs<HealthRequest>(R"({"op":"health"})");
  MustDecodeAs<PingRequest>(R"({"op":"ping","id":99})");
  MustDecodeAs<LocksRequest>(R"({"op":"locks"})");
}

TEST(EncodeTest, LocksCarryHolderButNeverToken) {
  LockView lock;
  lock.resource = "orders:1";
  lock.session = 7;
  lock.holder.pid = 4242;
  lock.holder.uid = 1000;
  lock.held_ms = 1500;
  lock.validity_ms = 28'000;
  lock.renew = true;
  lock.waiters = 2;
  lock.key = "lock:orders:1";
  const json line = json::parse(EncodeLocks(3, {lock}));
  EXPECT_EQ(line["id"], 3);
  ASSERT_EQ(line["locks"].size(), 1u);
  const json& l = line["locks"][0];
  EXPECT_EQ(l["resource"], "orders:1");
  EXPECT_EQ(l["session"], 7);
  EXPECT_EQ(l["pid"], 4242);
  EXPECT_EQ(l["uid"], 1000);
  EXPECT_EQ(l["held_ms"], 1500);
  EXPECT_EQ(l["validity_ms"], 28'000);
  EXPECT_EQ(l["renew"], true);
  EXPECT_EQ(l["waiters"], 2);
  EXPECT_FALSE(l.contains("token"));
  EXPECT_FALSE(l.contains("detached")) << "only a detached lease says it";
  lock.detached = true;
  EXPECT_EQ(json::parse(EncodeLocks(4, {lock}))["locks"][0]["detached"], true);
}

TEST(DecodeTest, UnicodeResourceNames) {
  EXPECT_EQ(MustDecodeAs<AcquireRequest>(With(kAcquire, "resource", "ключ/日本/🔒")).resource,
            "ключ/日本/🔒");
  // Escaped forms decode to the same bytes, including a surrogate pair.
  EXPECT_EQ(MustDecodeAs<AcquireRequest>(
                R"({"op":"acquire","resource":"caf\u00e9 \ud83d\udd12 \"q\" \\"})")
                .resource,
            "café 🔒 \"q\" \\");
}

TEST(DecodeTest, ResourceOf256BytesIsAccepted) {
  const std::string name(256, 'r');
  EXPECT_EQ(MustDecodeAs<AcquireRequest>(With(kAcquire, "resource", name)).resource, name);
}

// ---- ids ------------------------------------------------------------------------------------

TEST(DecodeIdTest, IntegersAndStringsAreEchoed) {
  EXPECT_EQ(MustDecode(R"({"id":0,"op":"ping"})").id, json(0));
  EXPECT_EQ(MustDecode(R"({"id":-5,"op":"ping"})").id, json(-5));
  EXPECT_EQ(MustDecode(R"({"id":9223372036854775807,"op":"ping"})").id,
            json(std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(MustDecode(R"({"id":-9223372036854775808,"op":"ping"})").id,
            json(std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(MustDecode(R"({"id":"req-1","op":"ping"})").id, json("req-1"));
  EXPECT_EQ(MustDecode(R"({"id":"","op":"ping"})").id, json(""));
  const std::string long_id(128, 'i');
  EXPECT_EQ(MustDecode(json{{"id", long_id}, {"op", "ping"}}.dump()).id, json(long_id));
}

TEST(DecodeIdTest, AbsentOrNullIdIsNull) {
  EXPECT_TRUE(MustDecode(R"({"op":"ping"})").id.is_null());
  EXPECT_TRUE(MustDecode(R"({"id":null,"op":"ping"})").id.is_null());
}

TEST(DecodeIdTest, EchoedIdSerializesAsSent) {
  EXPECT_EQ(EncodeOk(MustDecode(R"({"id":18,"op":"ping"})").id), "{\"id\":18,\"ok\":true}\n");
  EXPECT_EQ(EncodeOk(MustDecode(R"({"id":-18,"op":"ping"})").id), "{\"id\":-18,\"ok\":true}\n");
}

TEST(DecodeIdTest, BadIdsAreRefusedWithNullId) {
  for (const std::string id : {"1.5", "1.0", "true", "[1]", "{\"a\":1}", "9223372036854775808",
                               "18446744073709551616", "1e30"}) {
    SCOPED_TRACE(id);
    const DecodeError error = MustFail(R"({"id":)" + id + R"(,"op":"ping"})");
    EXPECT_TRUE(error.id.is_null());
    EXPECT_THAT(error.message, AllOf(HasSubstr("\"id\""), HasSubstr("integer"),
                                     HasSubstr("string of at most 128 bytes")));
  }
}

TEST(DecodeIdTest, IdOver128BytesIsRefused) {
  const DecodeError error = MustFail(json{{"id", std::string(129, 'i')}, {"op", "ping"}}.dump());
  EXPECT_TRUE(error.id.is_null());
  EXPECT_THAT(error.message, HasSubstr("129 bytes"));
}

TEST(DecodeIdTest, BadIdWinsOverLaterProblems) {
  EXPECT_TRUE(MustFail(R"({"id":1.5,"op":"nope"})").id.is_null());
}

TEST(DecodeIdTest, IdIsEchoedOnEveryLaterError) {
  EXPECT_EQ(MustFail(R"({"id":"abc","op":"nope"})").id, json("abc"));
  EXPECT_EQ(MustFail(R"({"id":42,"op":"acquire","resource":""})").id, json(42));
  EXPECT_EQ(MustFail(R"({"id":43,"op":"acquire","resource":"r","ttl":5})").id, json(43));
  EXPECT_EQ(MustFail(R"({"id":44})").id, json(44));
  EXPECT_EQ(MustFail(R"({"id":45,"op":"release","resource":"r","token":"x"})").id, json(45));
}

// ---- unparseable lines ----------------------------------------------------------------------

TEST(DecodeSyntaxTest, GarbageIsNotJson) {
  const DecodeError error = MustFail("hello there");
  EXPECT_TRUE(error.id.is_null());
  EXPECT_THAT(error.message, StartsWith("request is not valid JSON: "));
  EXPECT_THAT(error.message, HasSubstr("invalid literal"));
}

TEST(DecodeSyntaxTest, EmptyLine) {
  EXPECT_THAT(MustFail("").message, HasSubstr("unexpected end of input"));
  EXPECT_THAT(MustFail("   ").message, StartsWith("request is not valid JSON: "));
}

TEST(DecodeSyntaxTest, TruncatedJsonHasNoReadableId) {
  const DecodeError error = MustFail(R"({"id":7,"op":"acquire","resource":"a")");
  EXPECT_TRUE(error.id.is_null());
  EXPECT_THAT(error.message, StartsWith("request is not valid JSON: "));
  EXPECT_THAT(MustFail(R"({"id":7,"op":"acq)").message, StartsWith("request is not valid JSON"));
}

TEST(DecodeSyntaxTest, TrailingDataAndSecondObjectAreRefused) {
  EXPECT_THAT(MustFail(R"({"op":"ping"} x)").message, StartsWith("request is not valid JSON"));
  EXPECT_THAT(MustFail(R"({"op":"ping"}{"op":"ping"})").message,
              StartsWith("request is not valid JSON"));
}

TEST(DecodeSyntaxTest, NumberTooLargeForADoubleIsRefused) {
  EXPECT_THAT(MustFail(R"({"op":"acquire","resource":"r","ttl_ms":1e400})").message,
              StartsWith("request is not valid JSON"));
}

TEST(DecodeSyntaxTest, InvalidUtf8BytesAreRefusedAndNotEchoedRaw) {
  for (const std::string& bad : {std::string("\xff"), std::string("\xc3"), std::string("\xc0\xaf"),
                                 std::string("\xed\xa0\x80"), std::string("\xf4\x90\x80\x80")}) {
    const DecodeError error = MustFail(R"({"id":1,"op":"acquire","resource":"a)" + bad + R"("})");
    EXPECT_TRUE(error.id.is_null());
    EXPECT_THAT(error.message, HasSubstr("UTF-8"));
  }
}

TEST(DecodeSyntaxTest, LoneSurrogateEscapeIsRefused) {
  EXPECT_THAT(MustFail(R"({"op":"acquire","resource":"\ud800"})").message,
              StartsWith("request is not valid JSON"));
}

TEST(DecodeSyntaxTest, HugeGarbageYieldsAShortMessage) {
  const std::string line =
      "{\"op\":\"acquire\",\"resource\":\"" + std::string(65'000, 'x') + "\xff";
  EXPECT_LT(MustFail(line).message.size(), 400u);
}

TEST(DecodeSyntaxTest, TopLevelMustBeAnObject) {
  for (const std::string line : {R"([{"op":"ping"}])", R"("ping")", "42", "null", "true"}) {
    const DecodeError error = MustFail(line);
    EXPECT_TRUE(error.id.is_null());
    EXPECT_THAT(error.message, HasSubstr("must be a JSON object"));
  }
}

// ---- op and fields --------------------------------------------------------------------------

TEST(DecodeOpTest, MissingOp) {
  EXPECT_THAT(MustFail(R"({"id":1})").message,
              AllOf(HasSubstr("missing required field \"op\""),
                    HasSubstr("acquire, release, extend, held, health, ping")));
}

TEST(DecodeOpTest, OpMustBeAString) {
  for (const std::string op : {"5", "null", "true", "[\"ping\"]"}) {
    EXPECT_THAT(MustFail(R"({"op":)" + op + "}").message,
                AllOf(HasSubstr("\"op\" must be a string"), HasSubstr("ping")));
  }
}

TEST(DecodeOpTest, UnknownOpIsNamedAndValidOpsListed) {
  const DecodeError error = MustFail(R"({"id":3,"op":"acquier","resource":"r"})");
  EXPECT_EQ(error.id, json(3));
  EXPECT_THAT(error.message, AllOf(HasSubstr("unknown op \"acquier\""),
                                   HasSubstr("acquire, release, extend, held, health, ping")));
  EXPECT_THAT(MustFail(R"({"op":"PING"})").message, HasSubstr("unknown op \"PING\""));
  EXPECT_THAT(MustFail(R"({"op":""})").message, HasSubstr("unknown op \"\""));
}

TEST(DecodeOpTest, LongUnknownOpIsShortenedInTheMessage) {
  const DecodeError error = MustFail(json{{"op", std::string(5000, 'z')}}.dump());
  EXPECT_THAT(error.message, HasSubstr("zzz\"... (5000 bytes)"));
  EXPECT_LT(error.message.size(), 300u);
}

TEST(DecodeFieldsTest, UnknownFieldIsNamedWithTheKnownOnes) {
  const DecodeError error = MustFail(R"({"id":1,"op":"acquire","resource":"r","ttl":5000})");
  EXPECT_EQ(error.id, json(1));
  EXPECT_THAT(error.message,
              HasSubstr("unknown field \"ttl\" for op acquire; known fields: id, op, resource, "
                        "ttl_ms, wait_ms, renew"));
}

TEST(DecodeFieldsTest, FieldsOfOtherOpsAreUnknown) {
  EXPECT_THAT(MustFail(With(kRelease, "ttl_ms", 1000)).message,
              HasSubstr("unknown field \"ttl_ms\" for op release"));
  EXPECT_THAT(MustFail(With(kExtend, "renew", true)).message,
              HasSubstr("unknown field \"renew\" for op extend"));
  EXPECT_THAT(MustFail(With(kExtend, "wait_ms", 0)).message,
              HasSubstr("unknown field \"wait_ms\" for op extend"));
  EXPECT_THAT(MustFail(With(kAcquire, "token", kToken)).message,
              HasSubstr("unknown field \"token\" for op acquire"));
}

TEST(DecodeFieldsTest, BareOpsTakeNoFields) {
  for (const std::string op : {"held", "health", "ping"}) {
    EXPECT_THAT(MustFail(R"({"op":")" + op + R"(","resource":"r"})").message,
                HasSubstr("unknown field \"resource\" for op " + op + "; known fields: id, op"));
  }
  EXPECT_THAT(MustFail(R"({"op":"ping","":1})").message, HasSubstr("unknown field \"\""));
}

TEST(DecodeFieldsTest, UnknownFieldNameIsEscapedAndShortened) {
  EXPECT_THAT(MustFail(R"({"op":"ping","a\u0000b":1})").message,
              HasSubstr(R"(unknown field "a\u0000b")"));
  const DecodeError error = MustFail(json{{"op", "ping"}, {std::string(3000, 'k'), 1}}.dump());
  EXPECT_LT(error.message.size(), 300u);
}

TEST(DecodeFieldsTest, DuplicateFieldsAreRefused) {
  const DecodeError error =
      MustFail(R"({"id":5,"op":"acquire","resource":"r","ttl_ms":1000,"ttl_ms":5000})");
  EXPECT_EQ(error.id, json(5));
  EXPECT_THAT(error.message, HasSubstr("field \"ttl_ms\" appears more than once"));
  EXPECT_THAT(MustFail(R"({"op":"ping","op":"held"})").message, HasSubstr("\"op\" appears"));
}

TEST(DecodeFieldsTest, DuplicateIdIsAmbiguousSoNotEchoed) {
  const DecodeError error = MustFail(R"({"id":1,"op":"ping","id":2})");
  EXPECT_TRUE(error.id.is_null());
  EXPECT_THAT(error.message, HasSubstr("\"id\" appears more than once"));
}

// ---- resource -------------------------------------------------------------------------------

TEST(DecodeResourceTest, Missing) {
  EXPECT_THAT(MustFail(R"({"id":1,"op":"acquire"})").message,
              HasSubstr("missing required field \"resource\""));
  EXPECT_THAT(MustFail(json{{"op", "release"}, {"token", kToken}}.dump()).message,
              HasSubstr("missing required field \"resource\""));
}

TEST(DecodeResourceTest, WrongTypes) {
  for (const json& value :
       {json(5), json(nullptr), json(true), json::array({"r"}), json::object({{"r", 1}})}) {
    EXPECT_THAT(MustFail(With(kAcquire, "resource", value)).message,
                HasSubstr("field \"resource\" must be a string"));
  }
}

TEST(DecodeResourceTest, EmptyAndTooLong) {
  EXPECT_THAT(MustFail(With(kAcquire, "resource", "")).message,
              AllOf(HasSubstr("\"resource\""), HasSubstr("empty")));
  EXPECT_THAT(MustFail(With(kAcquire, "resource", std::string(257, 'r'))).message,
              AllOf(HasSubstr("\"resource\""), HasSubstr("257 bytes"), HasSubstr("256")));
}

TEST(DecodeResourceTest, ControlCharactersViaEscapes) {
  for (const std::string escaped : {R"(\u0000)", R"(\n)", R"(\t)", R"(\u007f)", R"(\u0085)"}) {
    SCOPED_TRACE(escaped);
    const DecodeError error =
        MustFail(R"({"id":9,"op":"acquire","resource":"a)" + escaped + R"(b"})");
    EXPECT_EQ(error.id, json(9));
    EXPECT_THAT(error.message, AllOf(HasSubstr("\"resource\""), HasSubstr("control character")));
  }
}

TEST(DecodeResourceTest, ValidatedForReleaseAndExtendToo) {
  EXPECT_THAT(MustFail(With(kRelease, "resource", "")).message, HasSubstr("empty"));
  EXPECT_THAT(MustFail(With(kExtend, "resource", std::string(300, 'r'))).message,
              HasSubstr("300 bytes"));
}

// ---- integers: ttl_ms, wait_ms --------------------------------------------------------------

TEST(DecodeMillisTest, TtlOutsideTheRangeNamesFieldAndRange) {
  for (const json& ttl : {json(99), json(0), json(-1), json(60'001)}) {
    SCOPED_TRACE(ttl.dump());
    EXPECT_THAT(MustFail(With(kAcquire, "ttl_ms", ttl)).message,
                AllOf(HasSubstr("field \"ttl_ms\" must be an integer number of milliseconds from "
                                "100 to 60000"),
                      HasSubstr("got " + ttl.dump())));
  }
}

// A user who asks for a long ttl learns how to hold a lock longer than max_ttl_ms.
TEST(DecodeMillisTest, TtlAboveMaxTtlSaysToRenewInstead) {
  const json extend = {{"id", 1}, {"op", "extend"}, {"resource", "db"},
                       {"token", "0123456789abcdef0123456789abcdef01234567"}};
  for (const json& op : {kAcquire, extend}) {
    SCOPED_TRACE(op.dump());
    EXPECT_THAT(MustFail(With(op, "ttl_ms", 60'001)).message,
                AllOf(HasSubstr("from 100 to 60000"), HasSubstr("\"renew\": true"),
                      HasSubstr("extend it by token")));
  }
  EXPECT_THAT(MustFail(With(kAcquire, "ttl_ms", 99)).message, Not(HasSubstr("renew")));
}

TEST(DecodeMillisTest, NonIntegerTtlIsRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"30000.5", "got 30000.5"},
      {"30000.0", "got 30000.0"},
      {"1e30", "got 1e+30"},
      {"18446744073709551616", "got 1.8446744073709552e+19"},  // 2^64
      {"9223372036854775808", "got 9223372036854775808"},      // 2^63: unsigned, > int64
      {"-9223372036854775809", "got -9.223372036854776e+18"},
      {R"("30000")", R"(got the string "30000")"},
      {"true", "got true"},
      {"null", "got null"},
      {"[30000]", "got an array"},
      {R"({"ms":1})", "got an object"},
  };
  for (const auto& [ttl, got] : cases) {
    SCOPED_TRACE(ttl);
    const DecodeError error =
        MustFail(R"({"id":1,"op":"acquire","resource":"r","ttl_ms":)" + ttl + "}");
    EXPECT_EQ(error.id, json(1));
    EXPECT_THAT(error.message, AllOf(HasSubstr("\"ttl_ms\""), HasSubstr("integer"),
                                     HasSubstr("100 to 60000"), HasSubstr(got)));
  }
}

TEST(DecodeMillisTest, MessageMentionsTheDefault) {
  EXPECT_THAT(MustFail(With(kAcquire, "ttl_ms", 1.5)).message,
              HasSubstr("Omit it for the default of 30000"));
}

TEST(DecodeMillisTest, RangeFollowsTheLimits) {
  Limits limits;
  limits.min_ttl_ms = 1'000;
  limits.max_ttl_ms = 10'000;
  limits.max_wait_ms = 500;
  EXPECT_THAT(MustFail(With(kAcquire, "ttl_ms", 999), limits).message,
              HasSubstr("from 1000 to 10000"));
  EXPECT_THAT(MustFail(With(kAcquire, "wait_ms", 501), limits).message, HasSubstr("from 0 to 500"));
  EXPECT_EQ(MustDecodeAs<AcquireRequest>(With(kAcquire, "wait_ms", 500), limits).wait_ms, 500);
}

TEST(DecodeMillisTest, WaitOutsideTheRange) {
  for (const json& wait :
       {json(-1), json(300'001), json(1.5), json("0"), json(false), json(1e30), json(nullptr)}) {
    SCOPED_TRACE(wait.dump());
    EXPECT_THAT(MustFail(With(kAcquire, "wait_ms", wait)).message,
                AllOf(HasSubstr("field \"wait_ms\" must be an integer number of milliseconds from "
                                "0 to 300000"),
                      HasSubstr("default of 0")));
  }
}

TEST(DecodeMillisTest, ExtendTtlHasTheSameRange) {
  for (const json& ttl : {json(99), json(60'001), json(500.5), json("500")}) {
    EXPECT_THAT(MustFail(With(kExtend, "ttl_ms", ttl)).message,
                HasSubstr("\"ttl_ms\" must be an integer number of milliseconds from 100 to"));
  }
}

// ---- renew ----------------------------------------------------------------------------------

TEST(DecodeRenewTest, MustBeABoolean) {
  for (const json& renew : {json("true"), json(1), json(0), json(nullptr)}) {
    SCOPED_TRACE(renew.dump());
    EXPECT_THAT(
        MustFail(With(kAcquire, "renew", renew)).message,
        AllOf(HasSubstr("field \"renew\" must be true or false"),
              HasSubstr("got " + (renew.is_string() ? "the string \"true\"" : renew.dump()))));
  }
}

// ---- token ----------------------------------------------------------------------------------

TEST(DecodeTokenTest, Missing) {
  for (const std::string op : {"release", "extend"}) {
    EXPECT_THAT(MustFail(json{{"op", op}, {"resource", "r"}}.dump()).message,
                AllOf(HasSubstr("missing required field \"token\""),
                      HasSubstr("40-character lowercase hex")));
  }
}

TEST(DecodeTokenTest, MalformedTokens) {
  const std::string upper = "0123456789ABCDEF0123456789abcdef01234567";
  for (const json& token : {json(""), json(kToken.substr(1)), json(kToken + "0"), json(upper),
                            json(std::string(40, 'g')), json(123), json(nullptr), json(true)}) {
    SCOPED_TRACE(token.dump());
    EXPECT_THAT(MustFail(With(kRelease, "token", token)).message,
                AllOf(HasSubstr("field \"token\" must be the 40-character lowercase hex token"),
                      HasSubstr("got ")));
    EXPECT_THAT(MustFail(With(kExtend, "token", token)).message, HasSubstr("\"token\""));
  }
}

// ---- round trips: client JSON -> decode -----------------------------------------------------

TEST(DecodeRoundTripTest, ResourceSurvivesSerialization) {
  for (const std::string name :
       {"plain", "with \"quotes\" and \\backslash\\", "tab-free ünïcödé", "🔒🔑", "a/b:c{d}"}) {
    const json request = {{"op", "acquire"}, {"resource", name}, {"ttl_ms", 1234}};
    EXPECT_EQ(MustDecodeAs<AcquireRequest>(request.dump()).resource, name);
    EXPECT_EQ(MustDecodeAs<AcquireRequest>(request.dump(-1, ' ', /*ensure_ascii=*/true)).resource,
              name);
  }
}

TEST(EncodeRoundTripTest, DecodeErrorsEncodeAsErrorReplies) {
  const DecodeError error = MustFail(R"({"id":"q","op":"acquire","resource":"r","ttl_ms":-5})");
  const json reply = json::parse(EncodeError(error.id, error.code, error.message));
  EXPECT_EQ(reply["id"], "q");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_EQ(reply["error"], "bad_request");
  EXPECT_EQ(reply["message"], error.message);
}

TEST(EncodeRoundTripTest, ExtremeIdsEchoExactly) {
  for (const std::string id :
       {"9223372036854775807", "-9223372036854775808", "\"\"", "\"ünï \\\"q\\\"\""}) {
    const Request request = MustDecode(R"({"op":"ping","id":)" + id + "}");
    EXPECT_EQ(EncodeOk(request.id), R"({"id":)" + id + R"(,"ok":true})" + "\n");
  }
}

}  // namespace
}  // namespace lw::protocol
