// libFuzzer target: one request line of arbitrary bytes through protocol::DecodeRequest, and
// the reply the agent would write for it through the encoders; and through the hot ops' fast
// path, protocol::DecodeHotRequest, which must never disagree with DecodeRequest.
//
// Beyond "does not crash" (ASan+UBSan), every outcome is checked against what docs/protocol.md
// promises, read back independently of the decoder:
//   a request: its op is the line's "op"; only that op's documented fields are present; its id
//     is the line's id (an int64 or a string of at most 128 bytes); its resource passes
//     ResourceNameProblem and equals the line's; ttl_ms and wait_ms lie within the Limits (and
//     take the defaults when absent); a token is 40 lowercase hex characters; the same line
//     with JSON whitespace after it decodes to the same request; the reply encoded for it is
//     one line that parses back to the same id and resource;
//   the fast path: whenever DecodeHotRequest returns a request, DecodeRequest returns an equal
//     one (same op, fields and id, the id of the same JSON type);
//   an error: code bad_request, a non-empty message of bounded size that is valid UTF-8, an op
//     that is empty or a known op, an id that is null or the line's id; EncodeError for it is
//     exactly one line that parses back to the same id, code and message.
//
// Each input is decoded twice: with the agent's default Limits, and with one of a table of
// other valid Limits picked by a hash of the input (so seeds stay plain request lines).

#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <variant>

#include "core/error_code.h"
#include "core/resource_name.h"
#include "core/token.h"
#include "fuzz/fuzz_check.h"
#include "protocol/fast_decode.h"
#include "protocol/messages.h"
#include "support/request_json.h"

namespace lw::protocol {
namespace {

using nlohmann::json;

constexpr size_t kMaxIdBytes = 128;        // docs/protocol.md, "Requests and replies"
constexpr size_t kMaxMessageBytes = 2048;  // messages quote client text only shortened
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Valid Limits (what ValidateConfig lets through, plus the int64 extremes for the decoder's
// own arithmetic): min <= default <= max.
constexpr Limits kLimitTable[] = {
    Limits{},                           // the defaults
    {1, 1, 1, 0},                       // a single ttl, no waiting
    {1000, 1000, 1000, 86'400'000},     // min == max, a day of waiting
    {1, 604'800'000, 604'800'000, 1},   // the widest valid ttls, default at the top
    {1, kMax, 1, kMax},                 // beyond any config: must not overflow
    {kMax, kMax, kMax, 0},
};

std::string Show(std::string_view what, const json& value) {
  return std::string(what) + ": " + value.dump(-1, ' ', true, json::error_handler_t::replace);
}

bool IsValidUtf8(const std::string& text) {
  try {
    (void)json(text).dump();  // the strict handler throws on invalid UTF-8
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

// An id as the decoder may hand it back: null, an int64, or a short string.
bool IsEchoableId(const json& id) {
  if (id.is_null() || id.is_number_integer()) {
    return !id.is_number_unsigned() ||
           id.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  }
  return id.is_string() && id.get_ref<const std::string&>().size() <= kMaxIdBytes;
}

const std::set<std::string>& FieldsOf(std::string_view op) {
  static const std::set<std::string> acquire = {"id",      "op",    "resource", "ttl_ms",
                                                "wait_ms", "renew", "fence",    "permits",
                                                "shared",  "detach"};
  static const std::set<std::string> release = {"id", "op", "resource", "token"};
  static const std::set<std::string> extend = {"id", "op", "resource", "token", "ttl_ms"};
  static const std::set<std::string> resume = {"id",    "op",      "resource", "token",
                                               "ttl_ms", "renew", "fence",    "permits",
                                               "permit", "shared"};
  static const std::set<std::string> campaign = {"id",     "op",    "name",
                                                 "value", "ttl_ms", "wait_ms"};
  static const std::set<std::string> resign = {"id", "op", "name", "token"};
  static const std::set<std::string> named = {"id", "op", "name"};
  static const std::set<std::string> bare = {"id", "op"};
  if (op == "acquire") return acquire;
  if (op == "release") return release;
  if (op == "extend") return extend;
  if (op == "resume") return resume;
  if (op == "campaign") return campaign;
  if (op == "resign") return resign;
  if (op == "leader" || op == "observe" || op == "unobserve") return named;
  return bare;
}

bool IsKnownOp(std::string_view op) {
  for (std::string_view known :
       {"acquire", "release", "extend", "resume", "held", "health", "ping", "upgrade", "locks",
        "campaign", "resign", "leader", "observe", "unobserve"}) {
    if (op == known) return true;
  }
  return false;
}

// Parses one encoded reply: exactly one '\n', at the end, and a JSON object before it.
json ParseReplyLine(const std::string& line) {
  LW_FUZZ_CHECK(!line.empty() && line.back() == '\n', "reply does not end with a newline");
  LW_FUZZ_CHECK(line.find('\n') == line.size() - 1, "reply spans more than one line: " + line);
  json reply = json::parse(line, nullptr, /*allow_exceptions=*/false);
  LW_FUZZ_CHECK(reply.is_object(), "reply is not a JSON object: " + line);
  return reply;
}

void CheckMillis(const json& sent, const char* field, int64_t value, int64_t lo, int64_t hi,
                 int64_t fallback) {
  LW_FUZZ_CHECK(value >= lo && value <= hi,
                std::string(field) + " " + std::to_string(value) + " is outside the Limits");
  if (!sent.contains(field)) {
    LW_FUZZ_CHECK(value == fallback, std::string(field) + " absent but not the default");
  } else {
    LW_FUZZ_CHECK(sent[field].is_number_integer() && sent[field] == value,
                  Show(std::string(field) + " differs from the line's", sent[field]));
  }
}

void CheckResource(const json& sent, const std::string& resource) {
  const auto problem = ResourceNameProblem(resource);
  LW_FUZZ_CHECK(!problem,
                "accepted resource is refused by ResourceNameProblem: " + problem.value_or(""));
  LW_FUZZ_CHECK(sent.contains("resource") && sent["resource"] == resource,
                "decoded resource differs from the line's");
}

void CheckToken(const json& sent, const std::string& token) {
  LW_FUZZ_CHECK(IsWellFormedToken(token), "accepted token is malformed: " + token);
  LW_FUZZ_CHECK(token.size() == 2 * kTokenBytes &&
                    token.find_first_not_of("0123456789abcdef") == std::string::npos,
                "accepted token is not 40 lowercase hex characters: " + token);
  LW_FUZZ_CHECK(sent.contains("token") && sent["token"] == token,
                "decoded token differs from the line's");
}

void CheckRequest(std::string_view line, const Limits& limits, const Request& request) {
  // What the line says, read without the decoder. It decoded, so it is a JSON object.
  const json sent = json::parse(line, nullptr, /*allow_exceptions=*/false);
  LW_FUZZ_CHECK(sent.is_object(), "a line that is not a JSON object decoded as a request");

  const std::string op(OpName(request.op));
  LW_FUZZ_CHECK(sent.contains("op") && sent["op"] == op, Show("op differs from the line's", sent));
  for (const auto& [key, value] : sent.items()) {
    LW_FUZZ_CHECK(FieldsOf(op).contains(key), "field \"" + key + "\" accepted for op " + op);
  }
  LW_FUZZ_CHECK(IsEchoableId(request.id), Show("decoded id cannot be echoed", request.id));
  const json sent_id = sent.contains("id") ? sent["id"] : json(nullptr);
  LW_FUZZ_CHECK(request.id == sent_id, Show("decoded id differs from the line's", request.id));

  std::visit(
      [&](const auto& o) {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, AcquireRequest>) {
          CheckResource(sent, o.resource);
          CheckMillis(sent, "ttl_ms", o.ttl_ms, limits.min_ttl_ms, limits.max_ttl_ms,
                      limits.default_ttl_ms);
          CheckMillis(sent, "wait_ms", o.wait_ms, 0, limits.max_wait_ms, 0);
          LW_FUZZ_CHECK(o.renew == sent.value("renew", false), "renew differs from the line's");
          LW_FUZZ_CHECK(o.fence == sent.value("fence", false), "fence differs from the line's");
          LW_FUZZ_CHECK(o.shared == sent.value("shared", false), "shared differs from the line's");
          LW_FUZZ_CHECK(o.detach == sent.value("detach", false), "detach differs from the line's");
          LW_FUZZ_CHECK(json(o.permits) == (sent.contains("permits") ? sent["permits"] : json(0)),
                        "permits differs from the line's");
        } else if constexpr (std::is_same_v<T, ReleaseRequest>) {
          CheckResource(sent, o.resource);
          CheckToken(sent, o.token);
        } else if constexpr (std::is_same_v<T, ExtendRequest>) {
          CheckResource(sent, o.resource);
          CheckToken(sent, o.token);
          CheckMillis(sent, "ttl_ms", o.ttl_ms, limits.min_ttl_ms, limits.max_ttl_ms,
                      limits.default_ttl_ms);
        } else if constexpr (std::is_same_v<T, ResumeRequest>) {
          CheckResource(sent, o.resource);
          CheckToken(sent, o.token);
          CheckMillis(sent, "ttl_ms", o.ttl_ms, limits.min_ttl_ms, limits.max_ttl_ms,
                      limits.default_ttl_ms);
          LW_FUZZ_CHECK(o.renew == sent.value("renew", false), "renew differs from the line's");
          LW_FUZZ_CHECK(o.shared == sent.value("shared", false), "shared differs from the line's");
          LW_FUZZ_CHECK(json(o.fence) == (sent.contains("fence") ? sent["fence"] : json(0)),
                        "fence differs from the line's");
          LW_FUZZ_CHECK(json(o.permits) == (sent.contains("permits") ? sent["permits"] : json(0)),
                        "permits differs from the line's");
          LW_FUZZ_CHECK(json(o.permit) == (sent.contains("permit") ? sent["permit"] : json(-1)),
                        "permit differs from the line's");
        }
      },
      request.op);

  // JSON whitespace after the line (a CRLF client, say) changes nothing. (Not before it: the
  // parser skips a UTF-8 byte order mark only at the very start.)
  const std::string padded = std::string(line) + " \t\r";
  const auto again = DecodeRequest(padded, limits);
  LW_FUZZ_CHECK(
      std::holds_alternative<Request>(again),
      "the line with whitespace after it is refused: " + std::get<DecodeError>(again).message);
  LW_FUZZ_CHECK(test::SameRequest(std::get<Request>(again), request),
                "the line with whitespace after it decodes differently: " +
                    test::RequestText(std::get<Request>(again)) + " instead of " +
                    test::RequestText(request));

  // The replies the agent writes for it carry the id and the resource back unchanged.
  const json ok = ParseReplyLine(EncodeOk(request.id));
  LW_FUZZ_CHECK(ok["id"] == request.id && ok["ok"] == true, Show("EncodeOk", ok));
  if (const auto* acquire = std::get_if<AcquireRequest>(&request.op)) {
    const json granted = ParseReplyLine(EncodeAcquired(request.id, acquire->resource,
                                                       std::string(2 * kTokenBytes, 'a'),
                                                       acquire->ttl_ms, 0, int64_t{1}));
    LW_FUZZ_CHECK(granted["id"] == request.id && granted["resource"] == acquire->resource,
                  Show("EncodeAcquired does not carry id and resource back", granted));
    const json lost =
        ParseReplyLine(EncodeLost(acquire->resource, std::string(2 * kTokenBytes, 'a'), "expired"));
    LW_FUZZ_CHECK(lost["resource"] == acquire->resource, Show("EncodeLost", lost));
  }
}

void CheckError(std::string_view line, const DecodeError& error) {
  LW_FUZZ_CHECK(error.code == ErrorCode::kBadRequest,
                "decode error with code " + std::string(ErrorCodeName(error.code)));
  LW_FUZZ_CHECK(ErrorCodeFromName(ErrorCodeName(error.code)) == error.code,
                "error code does not round-trip through its name");
  LW_FUZZ_CHECK(!error.message.empty(), "empty error message");
  LW_FUZZ_CHECK(error.message.size() <= kMaxMessageBytes,
                "error message of " + std::to_string(error.message.size()) + " bytes");
  LW_FUZZ_CHECK(IsValidUtf8(error.message), "error message is not valid UTF-8");
  LW_FUZZ_CHECK(error.op.empty() || IsKnownOp(error.op), "error names unknown op " + error.op);
  LW_FUZZ_CHECK(IsEchoableId(error.id), Show("error id cannot be echoed", error.id));
  if (!error.id.is_null()) {
    // An id is echoed only when the line was an object whose id could be read.
    const json sent = json::parse(line, nullptr, /*allow_exceptions=*/false);
    LW_FUZZ_CHECK(sent.is_object() && sent.contains("id") && sent["id"] == error.id,
                  Show("error id is not the line's id", error.id));
  }

  const json reply = ParseReplyLine(EncodeError(error.id, error.code, error.message));
  LW_FUZZ_CHECK(reply.size() == 4 && reply["id"] == error.id && reply["ok"] == false &&
                    reply["error"] == ErrorCodeName(error.code) &&
                    reply["message"] == error.message,
                Show("EncodeError does not read back", reply));
}

// The fast path decodes a line only as DecodeRequest does (it may decline any line).
void CheckHot(std::string_view line, const Limits& limits,
              const std::variant<Request, DecodeError>& strict) {
  const auto fast = DecodeHotRequest(line, limits);
  if (!fast) return;
  const auto* request = std::get_if<Request>(&strict);
  LW_FUZZ_CHECK(request != nullptr, "DecodeHotRequest decoded " + test::RequestText(*fast) +
                                        " where DecodeRequest refuses: " +
                                        std::get<DecodeError>(strict).message);
  LW_FUZZ_CHECK(test::SameRequest(*fast, *request),
                "DecodeHotRequest decoded " + test::RequestText(*fast) +
                    " where DecodeRequest decodes " + test::RequestText(*request));
}

void DecodeAndCheck(std::string_view line, const Limits& limits) {
  const auto decoded = DecodeRequest(line, limits);
  if (const auto* request = std::get_if<Request>(&decoded)) {
    CheckRequest(line, limits, *request);
  } else {
    CheckError(line, std::get<DecodeError>(decoded));
  }
  CheckHot(line, limits, decoded);
}

}  // namespace
}  // namespace lw::protocol

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lw::protocol;
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  DecodeAndCheck(line, Limits{});
  uint32_t hash = 2166136261u;  // FNV-1a: any change of the input may pick other Limits
  for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 16777619u;
  DecodeAndCheck(line, kLimitTable[hash % std::size(kLimitTable)]);
  return 0;
}
