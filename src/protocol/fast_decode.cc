// The hot ops' decoder: one pass over the line into views of it, then the same value rules the
// strict decoder applies (protocol/request_rules.h, ResourceNameProblem, IsWellFormedToken).
// It only ever narrows: whatever it is not certain of is left to DecodeRequest.

#include "protocol/fast_decode.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "core/resource_name.h"
#include "core/token.h"
#include "protocol/request_rules.h"

namespace lw::protocol {
namespace {

// The fields the fast path reads, as bits of a mask. A key outside them (or escaped, or not
// ASCII) sends the line to the strict decoder.
enum HotField : unsigned {
  kHotId,
  kHotOp,
  kHotResource,
  kHotToken,
  kHotTtl,
  kHotWait,
  kHotRenew,
  kHotFence,
  kHotPermits,
  kHotShared,
  kHotDetach,
  kHotOwner,
  kHotReentrant,
  kHotFieldCount
};
constexpr std::string_view kHotFieldNames[kHotFieldCount] = {
    "id",    "op",    "resource", "token",  "ttl_ms", "wait_ms",
    "renew", "fence", "permits",  "shared", "detach", "owner", "reentrant"};

constexpr unsigned Bit(HotField field) { return 1u << field; }

// The fields an op accepts (its kFields in messages.h), as a mask, computed at compile time.
template <typename T>
constexpr unsigned kAcceptedMask = [] {
  unsigned mask = 0;
  for (const std::string_view name : T::kFields) {
    for (unsigned field = 0; field < kHotFieldCount; ++field) {
      if (kHotFieldNames[field] == name) mask |= 1u << field;
    }
  }
  return mask;
}();

// What a line says, as views into it: nothing is copied before the whole line is known good.
struct HotLine {
  unsigned present = 0;  // Bit(field) for each field the line sent
  bool id_is_string = false;
  std::string_view id_text;  // the id, when a string
  int64_t id_number = 0;     // the id, when an integer
  std::string_view op;
  std::string_view resource;
  std::string_view token;
  int64_t ttl_ms = 0;
  int64_t wait_ms = 0;
  int64_t permits = 0;
  int64_t owner = 0;
  bool renew = false;
  bool fence = false;
  bool shared = false;
  bool detach = false;
  bool reentrant = false;

  bool Has(HotField field) const { return (present & Bit(field)) != 0; }
};

// Reads JSON tokens from a line, each after optional whitespace. Every reader returns false on
// anything it does not take, valid JSON or not.
class HotScanner {
 public:
  explicit HotScanner(std::string_view line) : line_(line) {}

  // The next token is the character c: consumed.
  bool Take(char c) {
    SkipSpace();
    if (pos_ == line_.size() || line_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  bool Next(char c) {
    SkipSpace();
    return pos_ < line_.size() && line_[pos_] == c;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == line_.size();
  }

  // A string of printable ASCII (0x20..0x7E) without escapes: a view of its contents.
  bool String(std::string_view* out) {
    if (!Take('"')) return false;
    for (size_t end = pos_; end < line_.size(); ++end) {
      const auto c = static_cast<unsigned char>(line_[end]);
      if (c == '"') {
        *out = line_.substr(pos_, end - pos_);
        pos_ = end + 1;
        return true;
      }
      if (c == '\\' || c < 0x20 || c > 0x7E) return false;
    }
    return false;
  }

  // An integer that fits int64: an optional '-', then digits without a leading zero ("-0"
  // refused too). A fraction or an exponent is left unread, so the next Take fails on it.
  bool Integer(int64_t* out) {
    SkipSpace();
    const bool negative = pos_ < line_.size() && line_[pos_] == '-';
    if (negative) ++pos_;
    const size_t start = pos_;
    constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
    uint64_t magnitude = 0;
    for (; pos_ < line_.size() && line_[pos_] >= '0' && line_[pos_] <= '9'; ++pos_) {
      const auto digit = static_cast<uint64_t>(line_[pos_] - '0');
      if (magnitude > (kMax - digit) / 10) return false;
      magnitude = magnitude * 10 + digit;
    }
    if (pos_ == start || (line_[start] == '0' && (pos_ - start > 1 || negative))) return false;
    *out = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
    return true;
  }

  bool Bool(bool* out) {
    SkipSpace();
    for (const bool value : {true, false}) {
      const std::string_view word = value ? "true" : "false";
      if (line_.substr(pos_).starts_with(word)) {
        pos_ += word.size();
        *out = value;
        return true;
      }
    }
    return false;
  }

 private:
  // JSON whitespace (RFC 8259): space, tab, LF, CR.
  void SkipSpace() {
    while (pos_ < line_.size() && (line_[pos_] == ' ' || line_[pos_] == '\t' ||
                                   line_[pos_] == '\n' || line_[pos_] == '\r')) {
      ++pos_;
    }
  }

  std::string_view line_;
  size_t pos_ = 0;
};

// Reads the value of the field named key; false for a key it does not read, a key sent before,
// or a value not of the field's type.
bool ReadField(HotScanner& in, std::string_view key, HotLine* line) {
  unsigned field = 0;
  while (field < kHotFieldCount && kHotFieldNames[field] != key) ++field;
  if (field == kHotFieldCount || (line->present & (1u << field)) != 0) return false;
  line->present |= 1u << field;
  switch (static_cast<HotField>(field)) {
    case kHotId:
      line->id_is_string = in.Next('"');
      if (!line->id_is_string) return in.Integer(&line->id_number);
      return in.String(&line->id_text) && line->id_text.size() <= kMaxIdBytes;
    case kHotOp:
      return in.String(&line->op);
    case kHotResource:
      return in.String(&line->resource);
    case kHotToken:
      return in.String(&line->token);
    case kHotTtl:
      return in.Integer(&line->ttl_ms);
    case kHotWait:
      return in.Integer(&line->wait_ms);
    case kHotPermits:
      return in.Integer(&line->permits);
    case kHotRenew:
      return in.Bool(&line->renew);
    case kHotFence:
      return in.Bool(&line->fence);
    case kHotShared:
      return in.Bool(&line->shared);
    case kHotDetach:
      return in.Bool(&line->detach);
    case kHotOwner:
      return in.Integer(&line->owner);
    case kHotReentrant:
      return in.Bool(&line->reentrant);
    case kHotFieldCount:
      break;
  }
  return false;
}

// The line as one flat object of fields the fast path reads, and nothing after it.
bool Scan(std::string_view text, HotLine* line) {
  HotScanner in(text);
  if (!in.Take('{')) return false;
  do {
    std::string_view key;
    if (!in.String(&key) || !in.Take(':') || !ReadField(in, key, line)) return false;
  } while (in.Take(','));
  return in.Take('}') && in.AtEnd();
}

// A whole-number field: its value when sent and the rule admits it, the rule's fallback when
// absent; false when sent and refused.
bool Whole(const HotLine& line, HotField field, int64_t value, const IntRule& rule, int64_t* out) {
  if (!line.Has(field)) {
    *out = rule.fallback;
    return true;
  }
  if (!rule.Admits(value)) return false;
  *out = value;
  return true;
}

bool Fill(const HotLine& line, const Limits& limits, AcquireRequest* request) {
  if (!line.Has(kHotResource) || ResourceNameProblem(line.resource)) return false;
  int64_t permits = 0;
  int64_t owner = 0;
  if (!Whole(line, kHotTtl, line.ttl_ms, TtlRule(limits), &request->ttl_ms) ||
      !Whole(line, kHotWait, line.wait_ms, AcquireWaitRule(limits), &request->wait_ms) ||
      !Whole(line, kHotPermits, line.permits, kPermitsRule, &permits) ||
      !Whole(line, kHotOwner, line.owner, kOwnerRule, &owner)) {
    return false;
  }
  request->permits = static_cast<int>(permits);
  request->owner = static_cast<uint64_t>(owner);
  request->reentrant = line.reentrant;
  // Flags not sent are false, as the strict decoder's defaults and the struct's.
  request->renew = line.renew;
  request->fence = line.fence;
  request->shared = line.shared;
  request->detach = line.detach;
  if (SharedConflict(*request, line.Has(kHotShared)) || DetachConflict(*request)) return false;
  request->resource = line.resource;
  return true;
}

bool Fill(const HotLine& line, const Limits& /*limits*/, ReleaseRequest* request) {
  if (!line.Has(kHotResource) || ResourceNameProblem(line.resource)) return false;
  if (!line.Has(kHotToken) || !IsWellFormedToken(line.token)) return false;
  request->resource = line.resource;
  request->token = line.token;
  return true;
}

template <typename T>
std::optional<Request> Build(const HotLine& line, const Limits& limits) {
  if ((line.present & ~kAcceptedMask<T>) != 0) return std::nullopt;  // a field T refuses
  T op;
  if (!Fill(line, limits, &op)) return std::nullopt;
  nlohmann::json id;  // null: no id sent
  if (line.Has(kHotId)) {
    if (line.id_is_string) {
      id = std::string(line.id_text);
    } else {
      id = line.id_number;
    }
  }
  return Request{std::move(id), std::move(op)};
}

}  // namespace

std::optional<Request> DecodeHotRequest(std::string_view text, const Limits& limits) {
  HotLine line;
  if (!Scan(text, &line) || !line.Has(kHotOp)) return std::nullopt;
  if (line.op == AcquireRequest::kName) return Build<AcquireRequest>(line, limits);
  if (line.op == ReleaseRequest::kName) return Build<ReleaseRequest>(line, limits);
  return std::nullopt;
}

}  // namespace lw::protocol
