// Request decoding: one line of client bytes -> a validated Request, or a DecodeError whose
// message tells a person what was wrong and what to send instead.
//
// Order of checks (each later error carries the id once it has been read):
//   JSON syntax -> object at top level -> id -> duplicate fields -> op -> unknown fields ->
//   the op's own fields, in the order they are documented.

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "core/quote.h"
#include "core/resource_name.h"
#include "core/token.h"
#include "protocol/messages.h"
#include "protocol/request_rules.h"

namespace lw::protocol {
namespace {

using nlohmann::json;

// Why a request is refused; nullopt means the part checked so far is fine.
using Problem = std::optional<std::string>;

constexpr size_t kMaxQuotedBytes = 64;   // longest piece of client text echoed in a message
constexpr size_t kMaxReasonBytes = 200;  // longest parser reason echoed in a message

// Client text as it appears in a message (core/quote.h).
std::string Quoted(std::string_view text) { return QuoteClientText(text, kMaxQuotedBytes); }

// Makes arbitrary bytes valid UTF-8 by letting the serializer replace what is invalid; used
// on parser messages, which may quote the very bytes that made the line unparseable.
std::string ValidUtf8(const std::string& text) {
  return json::parse(json(text).dump(-1, ' ', false, json::error_handler_t::replace))
      .get<std::string>();
}

// How a received value reads in a message: numbers and booleans as sent, strings quoted,
// containers by kind. Never long.
std::string Describe(const json& value) {
  switch (value.type()) {
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
    case json::value_t::boolean:
    case json::value_t::null:
      return value.dump();
    case json::value_t::string:
      return "the string " + Quoted(value.get_ref<const std::string&>());
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    default:
      return "an unsupported value";
  }
}

// nlohmann's exception text, minus the "[json.exception...] parse error at line 1, column N: "
// preamble (a request is always one line), plus the byte offset, shortened.
std::string ParserReason(const json::exception& e) {
  std::string_view what = e.what();
  if (const size_t end = what.find("] "); !what.empty() && what[0] == '[' && end != what.npos) {
    what.remove_prefix(end + 2);
  }
  if (what.starts_with("parse error at line")) {
    if (const size_t colon = what.find(": "); colon != what.npos) what.remove_prefix(colon + 2);
  }
  std::string reason(ShortenUtf8(what, kMaxReasonBytes));
  if (what.size() > kMaxReasonBytes) reason += "...";
  if (const auto* parse_error = dynamic_cast<const json::parse_error*>(&e)) {
    reason += " (at byte " + std::to_string(parse_error->byte) + ")";
  }
  return ValidUtf8(reason);
}

// Parses the line. Also reports the first top-level key that occurs twice: nlohmann would
// silently keep the last one, and a request must never mean something other than it reads.
Problem Parse(std::string_view line, json* out, std::string* duplicate) {
  std::set<std::string, std::less<>> seen;
  const json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event,
                                                json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && duplicate->empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second) *duplicate = key;
    }
    return true;
  };
  try {
    *out = json::parse(line.begin(), line.end(), note_keys);
  } catch (const json::exception& e) {
    return "request is not valid JSON: " + ParserReason(e) +
           ". Send one JSON object per line, e.g. {\"id\":1,\"op\":\"ping\"}";
  }
  return std::nullopt;
}

// Reads the optional id. An id that cannot be echoed faithfully is refused rather than
// altered, since the client matches replies to requests by it.
Problem ReadId(const json& request, json* id) {
  *id = nullptr;
  const auto it = request.find("id");
  if (it == request.end() || it->is_null()) return std::nullopt;
  const std::string expected =
      "field \"id\" must be an integer that fits in a signed 64-bit value or a string of at most " +
      std::to_string(kMaxIdBytes) + " bytes";
  if (it->is_number_unsigned()) {
    const auto value = it->get<uint64_t>();
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return expected + "; got " + it->dump();
    }
    *id = static_cast<int64_t>(value);
    return std::nullopt;
  }
  if (it->is_number_integer()) {
    *id = it->get<int64_t>();
    return std::nullopt;
  }
  if (it->is_string()) {
    const size_t size = it->get_ref<const std::string&>().size();
    if (size > kMaxIdBytes)
      return expected + "; got a string of " + std::to_string(size) + " bytes";
    *id = *it;
    return std::nullopt;
  }
  return expected + "; got " + Describe(*it);
}

// Typed, range-checked access to the fields of one request object.
class FieldReader {
 public:
  explicit FieldReader(const json& request) : request_(request) {}

  // The lock's name in `field` ("resource"; elections: "name").
  Problem Resource(std::string* out, const std::string& field = "resource") const;
  // A required string of 1..max_bytes bytes of UTF-8 without control characters.
  Problem Text(const std::string& field, size_t max_bytes, std::string* out) const;
  Problem Token(std::string* out) const;
  // An optional integer number of milliseconds the rule admits; its fallback when absent.
  // over_hint: what to do instead, added when the value is an integer above the rule's hi.
  Problem Millis(const std::string& name, const IntRule& rule, int64_t* out,
                 std::string_view over_hint = {}) const;
  // An optional boolean; fallback when absent.
  Problem Flag(const std::string& name, bool fallback, bool* out) const;
  // An optional whole number the rule admits; its fallback when absent.
  template <class Int>
  Problem Count(const std::string& name, const IntRule& rule, Int* out) const;
  bool Has(const std::string& name) const { return Find(name) != nullptr; }
  const json* Raw(const std::string& name) const { return Find(name); }

 private:
  const json* Find(const std::string& name) const {
    const auto it = request_.find(name);
    return it == request_.end() ? nullptr : &*it;
  }

  const json& request_;
};

Problem FieldReader::Resource(std::string* out, const std::string& field) const {
  static const std::string kRule =
      "1 to " + std::to_string(kMaxResourceBytes) + " bytes of UTF-8 without control characters";
  const std::string quoted = "\"" + field + "\"";
  const json* value = Find(field);
  if (value == nullptr) {
    return "missing required field " + quoted +
           (field == "resource" ? ": the lock's name, " : ": the election's name, ") + kRule;
  }
  if (!value->is_string()) {
    return "field " + quoted + " must be a string of " + kRule + "; got " + Describe(*value);
  }
  const auto& name = value->get_ref<const std::string&>();
  if (const auto problem = ResourceNameProblem(name)) {
    return "field " + quoted + " is refused: " + *problem + ". Use " + kRule;
  }
  *out = name;
  return std::nullopt;
}

Problem FieldReader::Text(const std::string& field, size_t max_bytes, std::string* out) const {
  const std::string rule =
      "1 to " + std::to_string(max_bytes) + " bytes of UTF-8 without control characters";
  const json* value = Find(field);
  if (value == nullptr) return "missing required field \"" + field + "\": " + rule;
  if (!value->is_string()) {
    return "field \"" + field + "\" must be a string of " + rule + "; got " + Describe(*value);
  }
  const auto& text = value->get_ref<const std::string&>();
  if (const auto problem = TextProblem(text, max_bytes, "the " + field)) return "field \"" + field + "\" is refused: " + *problem + ". Use " + rule;
  *out = text;
  return std::nullopt;
}

Problem FieldReader::Token(std::string* out) const {
  static const std::string kRule = "the " + std::to_string(2 * kTokenBytes) +
                                   "-character lowercase hex token that acquire returned";
  const json* value = Find("token");
  if (value == nullptr) return "missing required field \"token\": " + kRule;
  if (!value->is_string() || !IsWellFormedToken(value->get_ref<const std::string&>())) {
    return "field \"token\" must be " + kRule + "; got " + Describe(*value);
  }
  *out = value->get_ref<const std::string&>();
  return std::nullopt;
}

Problem FieldReader::Millis(const std::string& name, const IntRule& rule, int64_t* out,
                            std::string_view over_hint) const {
  const json* value = Find(name);
  if (value == nullptr) {
    *out = rule.fallback;
    return std::nullopt;
  }
  const std::string problem =
      "field \"" + name + "\" must be an integer number of milliseconds from " +
      std::to_string(rule.lo) + " to " + std::to_string(rule.hi) + "; got " + Describe(*value) +
      ". Omit it for the default of " + std::to_string(rule.fallback);
  if (!value->is_number_integer()) return problem;  // floats, strings, booleans, null...
  if (value->is_number_unsigned() &&
      value->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return problem;
  }
  const auto millis = value->get<int64_t>();
  if (millis > rule.hi && !over_hint.empty()) return problem + ". " + std::string(over_hint);
  if (!rule.Admits(millis)) return problem;
  *out = millis;
  return std::nullopt;
}

Problem FieldReader::Flag(const std::string& name, bool fallback, bool* out) const {
  const json* value = Find(name);
  if (value == nullptr) {
    *out = fallback;
    return std::nullopt;
  }
  if (!value->is_boolean()) {
    return "field \"" + name + "\" must be true or false; got " + Describe(*value) +
           ". Omit it for the default of " + (fallback ? "true" : "false");
  }
  *out = value->get<bool>();
  return std::nullopt;
}

template <class Int>
Problem FieldReader::Count(const std::string& name, const IntRule& rule, Int* out) const {
  const json* value = Find(name);
  if (value == nullptr) {
    *out = static_cast<Int>(rule.fallback);
    return std::nullopt;
  }
  if (!value->is_number_integer() || !rule.Admits(value->get<int64_t>()) ||
      (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(rule.hi))) {
    return "field \"" + name + "\" must be a whole number from " + std::to_string(rule.lo) +
           " to " + std::to_string(rule.hi) + "; got " + Describe(*value);
  }
  *out = static_cast<Int>(value->get<int64_t>());
  return std::nullopt;
}

// A ttl above max_ttl_ms: what to do instead.
constexpr std::string_view kLongTtlHint =
    "For work longer than max_ttl_ms, take a shorter ttl and keep the lock alive: \"renew\": "
    "true (the agent extends it at ttl/3 while this connection lives) or extend it by token. "
    "max_ttl_ms also bounds how long a restarted Redis master is kept out of the quorum, which "
    "is why it is small (docs/safety.md)";

// One decoder per request type: its own fields, in the order they are documented.
// "resources" of an acquire: 2..kMaxResourcesAtOnce distinct names, each by the resource-name
// rules; kept sorted (the canonical order they are taken in).
Problem ResourceList(const json& value, std::vector<std::string>* out) {
  const std::string rule = "an array of 2 to " + std::to_string(kMaxResourcesAtOnce) +
                           " distinct resource names";
  if (!value.is_array() || value.size() < 2 || value.size() > kMaxResourcesAtOnce) {
    return "field \"resources\" must be " + rule + "; got " + Describe(value);
  }
  for (size_t i = 0; i < value.size(); ++i) {
    const json& item = value[i];
    const auto problem = item.is_string() ? ResourceNameProblem(item.get_ref<const std::string&>())
                                          : std::optional<std::string>("not a string");
    if (problem) {
      return "field \"resources\" item " + std::to_string(i) + " is refused: " + *problem + ". It must be " + rule;
    }
    out->push_back(item.get<std::string>());
  }
  std::sort(out->begin(), out->end());
  if (std::adjacent_find(out->begin(), out->end()) != out->end()) {
    return "field \"resources\" names " + json(*std::adjacent_find(out->begin(), out->end())).dump() +
           " twice; it must be " + rule;
  }
  return std::nullopt;
}

Problem DecodeFields(const FieldReader& fields, const Limits& limits, AcquireRequest* request) {
  if (const json* list = fields.Raw("resources")) {
    if (fields.Has("resource")) {
      return std::string("send \"resource\" for one lock or \"resources\" for several, not both");
    }
    if (auto p = ResourceList(*list, &request->resources)) return p;
  } else if (auto p = fields.Resource(&request->resource)) {
    return p;
  }
  if (auto p = fields.Millis("ttl_ms", TtlRule(limits), &request->ttl_ms, kLongTtlHint)) return p;
  if (auto p = fields.Millis("wait_ms", AcquireWaitRule(limits), &request->wait_ms)) return p;
  if (auto p = fields.Flag("renew", false, &request->renew)) return p;
  if (auto p = fields.Flag("fence", false, &request->fence)) return p;
  if (auto p = fields.Count("permits", kPermitsRule, &request->permits)) return p;
  if (auto p = fields.Flag("shared", false, &request->shared)) return p;
  if (auto p = SharedConflict(*request, fields.Has("shared"))) return p;
  if (auto p = fields.Flag("detach", false, &request->detach)) return p;
  if (auto p = fields.Count("owner", kOwnerRule, &request->owner)) return p;
  if (auto p = fields.Flag("reentrant", false, &request->reentrant)) return p;
  return DetachConflict(*request);
}

Problem DecodeFields(const FieldReader& fields, const Limits& limits, ResumeRequest* request) {
  if (auto p = fields.Resource(&request->resource)) return p;
  if (auto p = fields.Token(&request->token)) return p;
  if (auto p = fields.Millis("ttl_ms", TtlRule(limits), &request->ttl_ms, kLongTtlHint)) return p;
  if (auto p = fields.Flag("renew", false, &request->renew)) return p;
  if (auto p = fields.Count("fence", kFenceRule, &request->fence)) return p;
  if (auto p = fields.Count("permits", kPermitsRule, &request->permits)) return p;
  if (auto p = fields.Count("permit", kPermitRule, &request->permit)) return p;
  if (auto p = fields.Flag("shared", false, &request->shared)) return p;
  if (auto p = fields.Flag("election", false, &request->election)) return p;
  if (auto p = fields.Count("owner", kOwnerRule, &request->owner)) return p;
  if (auto p = fields.Count("depth", kDepthRule, &request->depth)) return p;
  return ResumeConflict(*request, fields.Has("shared"));
}

Problem DecodeFields(const FieldReader& fields, const Limits& limits, CampaignRequest* request) {
  if (auto p = fields.Resource(&request->name, "name")) return p;
  if (auto p = fields.Text("value", CampaignRequest::kMaxValueBytes, &request->value)) return p;
  if (auto p = fields.Millis("ttl_ms", TtlRule(limits), &request->ttl_ms, kLongTtlHint)) return p;
  return fields.Millis("wait_ms", CampaignWaitRule(limits), &request->wait_ms);
}

Problem DecodeFields(const FieldReader& fields, const Limits& /*limits*/, ResignRequest* request) {
  if (auto p = fields.Resource(&request->name, "name")) return p;
  return fields.Token(&request->token);
}

// leader, observe and unobserve name an election and nothing else.
template <typename NamedRequest>
  requires requires(NamedRequest r) { r.name; }
Problem DecodeFields(const FieldReader& fields, const Limits& /*limits*/, NamedRequest* request) {
  return fields.Resource(&request->name, "name");
}

Problem DecodeFields(const FieldReader& fields, const Limits& /*limits*/,
                     ReleaseRequest* request) {
  if (auto p = fields.Resource(&request->resource)) return p;
  return fields.Token(&request->token);
}

Problem DecodeFields(const FieldReader& fields, const Limits& limits, ExtendRequest* request) {
  if (auto p = fields.Resource(&request->resource)) return p;
  if (auto p = fields.Token(&request->token)) return p;
  return fields.Millis("ttl_ms", TtlRule(limits), &request->ttl_ms, kLongTtlHint);
}

// held, health, ping and locks carry nothing beyond id and op.
template <typename BareRequest>
  requires(!requires(BareRequest r) { r.name; })
Problem DecodeFields(const FieldReader& /*fields*/, const Limits& /*limits*/,
                     BareRequest* /*request*/) {
  return std::nullopt;
}

struct OpSpec {
  std::string_view name;
  std::span<const std::string_view> fields;  // every field the op accepts, id and op included
  Problem (*decode)(const FieldReader&, const Limits&, Op*);
};

template <typename T>
Problem DecodeInto(const FieldReader& fields, const Limits& limits, Op* op) {
  T request;
  if (auto p = DecodeFields(fields, limits, &request)) return p;
  *op = std::move(request);
  return std::nullopt;
}

// The decoder's table, one row per alternative of Op, in its order.
template <size_t... I>
constexpr auto MakeOpTable(std::index_sequence<I...>) {
  return std::array<OpSpec, sizeof...(I)>{
      OpSpec{std::variant_alternative_t<I, Op>::kName, std::variant_alternative_t<I, Op>::kFields,
             &DecodeInto<std::variant_alternative_t<I, Op>>}...};
}
constexpr auto kOps = MakeOpTable(std::make_index_sequence<std::variant_size_v<Op>>());

std::string Join(std::span<const std::string_view> words) {
  std::string out;
  for (const auto word : words) {
    if (!out.empty()) out += ", ";
    out += word;
  }
  return out;
}

std::string ValidOps() {
  std::string out;
  for (const auto& spec : kOps) {
    if (!out.empty()) out += ", ";
    out += spec.name;
  }
  return out;
}

Problem FindOp(const json& request, const OpSpec** spec) {
  const auto it = request.find("op");
  if (it == request.end()) return "missing required field \"op\"; valid ops: " + ValidOps();
  if (!it->is_string()) {
    return "field \"op\" must be a string naming the operation (" + ValidOps() + "); got " +
           Describe(*it);
  }
  const auto& name = it->get_ref<const std::string&>();
  for (const auto& candidate : kOps) {
    if (candidate.name == name) {
      *spec = &candidate;
      return std::nullopt;
    }
  }
  return "unknown op " + Quoted(name) + "; valid ops: " + ValidOps();
}

// Refuses fields the op does not know, so that a misspelled optional field ("ttl" for
// "ttl_ms") is an error instead of a silently applied default.
Problem CheckKnownFields(const json& request, const OpSpec& spec) {
  for (const auto& [key, value] : request.items()) {
    bool known = false;
    for (const auto field : spec.fields) known = known || field == key;
    if (!known) {
      return "unknown field " + Quoted(key) + " for op " + std::string(spec.name) +
             "; known fields: " + Join(spec.fields);
    }
  }
  return std::nullopt;
}

DecodeError BadRequest(json id, std::string message) {
  return DecodeError{std::move(id), ErrorCode::kBadRequest, std::move(message), {}};
}

}  // namespace

std::variant<Request, DecodeError> DecodeRequest(std::string_view line, const Limits& limits) {
  json request;
  std::string duplicate;
  if (auto problem = Parse(line, &request, &duplicate)) return BadRequest(nullptr, *problem);
  if (!request.is_object()) {
    return BadRequest(nullptr,
                      "request must be a JSON object such as {\"id\":1,\"op\":\"ping\"}; got " +
                          Describe(request));
  }
  // A repeated id is ambiguous, so its error cannot echo either value.
  json id;
  if (duplicate != "id") {
    if (auto problem = ReadId(request, &id)) return BadRequest(nullptr, *problem);
  }
  if (!duplicate.empty()) {
    return BadRequest(id, "field " + Quoted(duplicate) + " appears more than once; send it once");
  }
  const OpSpec* spec = nullptr;
  if (auto problem = FindOp(request, &spec)) return BadRequest(id, *problem);
  auto refuse = [&](std::string problem) {
    DecodeError error = BadRequest(id, std::move(problem));
    error.op = spec->name;
    return error;
  };
  if (auto problem = CheckKnownFields(request, *spec)) return refuse(*problem);
  Request decoded{id, {}};
  if (auto problem = spec->decode(FieldReader(request), limits, &decoded.op)) {
    return refuse(*problem);
  }
  return decoded;
}

std::string_view OpName(const Op& op) {
  return std::visit([](const auto& o) { return std::decay_t<decltype(o)>::kName; }, op);
}

}  // namespace lw::protocol
