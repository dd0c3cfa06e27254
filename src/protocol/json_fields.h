#pragma once
// Reads the fields of a JSON object that came from outside (a record on the masters): every
// field must be there with its type and within its bounds, or the reader is not ok(). The
// holder report (protocol/hold_json.h, fleet/records.h) and the fleet's other records read
// through it.

#include <nlohmann/json.hpp>

#include <climits>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace lw::protocol {

class JsonFields {
 public:
  using Json = nlohmann::json;

  explicit JsonFields(const Json& j) : j_(j) {}
  bool ok() const { return ok_; }

  std::string Text(const char* name, size_t max_bytes) {
    const Json* v = Find(name);
    if (v == nullptr || !v->is_string() || v->get_ref<const std::string&>().size() > max_bytes) {
      return Fail<std::string>();
    }
    return v->get<std::string>();
  }
  int64_t Int(const char* name, int64_t lo, int64_t hi) {
    const Json* v = Find(name);
    if (v == nullptr || !v->is_number_integer()) return Fail<int64_t>();
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) return Fail<int64_t>();
      return static_cast<int64_t>(u);
    }
    const int64_t i = v->get<int64_t>();
    if (i < lo || i > hi) return Fail<int64_t>();
    return i;
  }
  int Small(const char* name, int lo) { return static_cast<int>(Int(name, lo, INT_MAX)); }
  int64_t Ms(const char* name) { return Int(name, 0, std::numeric_limits<int64_t>::max()); }
  bool Bool(const char* name) {
    const Json* v = Find(name);
    if (v == nullptr || !v->is_boolean()) return Fail<bool>();
    return v->get<bool>();
  }
  double Number(const char* name, double lo, double hi) {
    const Json* v = Find(name);
    if (v == nullptr || !v->is_number()) return Fail<double>();
    const double d = v->get<double>();
    if (!(d >= lo && d <= hi)) return Fail<double>();
    return d;
  }
  // The array `name` with at most max_items elements; null (and not ok) otherwise.
  const Json* List(const char* name, size_t max_items) {
    const Json* v = Find(name);
    if (v == nullptr || !v->is_array() || v->size() > max_items) return Fail<const Json*>();
    return v;
  }
  const Json* Object(const char* name) {
    const Json* v = Find(name);
    if (v == nullptr || !v->is_object()) return Fail<const Json*>();
    return v;
  }
  // An optional integer: absent or null is nullopt.
  std::optional<int64_t> MaybeInt(const char* name) {
    const Json* v = Find(name);
    if (v == nullptr || v->is_null()) return std::nullopt;
    return Int(name, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  }
  // An optional integer 0..INT_MAX: absent or null is `absent`.
  int SmallOr(const char* name, int absent) {
    const Json* v = Find(name);
    if (v == nullptr || v->is_null()) return absent;
    return Small(name, 0);
  }
  // An optional boolean: absent or null is `absent`.
  bool BoolOr(const char* name, bool absent) {
    const Json* v = Find(name);
    if (v == nullptr || v->is_null()) return absent;
    return Bool(name);
  }
  // An optional string (absent or null: nullopt) of at most max_bytes.
  std::optional<std::string> MaybeText(const char* name, size_t max_bytes) {
    const Json* v = Find(name);
    if (v == nullptr || v->is_null()) return std::nullopt;
    return Text(name, max_bytes);
  }
  void Require(bool condition) { ok_ = ok_ && condition; }

 private:
  const Json* Find(const char* name) const {
    auto it = j_.find(name);
    return it == j_.end() ? nullptr : &*it;
  }
  template <typename T>
  T Fail() {
    ok_ = false;
    return T{};
  }

  const Json& j_;
  bool ok_ = true;
};

}  // namespace lw::protocol
