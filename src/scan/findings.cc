#include "scan/findings.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <tuple>

#include "core/key_parts.h"

namespace lw {

std::string_view FindingName(FindingKind kind) {
  const auto i = static_cast<size_t>(kind);
  return i < kFindingNames.size() ? kFindingNames[i] : "unknown";
}

std::optional<FindingKind> ClassifyTtl(int64_t pttl, bool is_lock_key, int64_t max_ttl_ms) {
  if (pttl == -1) return FindingKind::kNoTtl;
  if (is_lock_key && pttl > max_ttl_ms) return FindingKind::kTtlAboveMax;
  return std::nullopt;
}

namespace {

std::optional<int64_t> WholeNumber(std::string_view text) {
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

// A reader's score: its expiry in ms. Scores are whole numbers as the scripts write them; a
// fraction ("1.5e12" from a foreign writer) is read down to whole ms.
std::optional<int64_t> ScoreMs(std::string_view text) {
  if (auto n = WholeNumber(text)) return n;
  double d = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
  if (ec != std::errc() || end != text.data() + text.size() || !(d > -9e18 && d < 9e18)) {
    return std::nullopt;
  }
  return static_cast<int64_t>(d);
}

}  // namespace

std::optional<int64_t> MasterNowMs(const Reply& time) {
  if (time.kind != Reply::Kind::kArray || time.elements.size() != 2) return std::nullopt;
  const auto s = WholeNumber(time.elements[0].text), us = WholeNumber(time.elements[1].text);
  if (!s || !us) return std::nullopt;
  return *s * 1000 + *us / 1000;
}

std::vector<LockCopy> HoldsOf(std::string_view key_prefix, size_t master, const std::string& key,
                              const Reply& value, int64_t pttl, int64_t now_ms) {
  std::vector<LockCopy> out;
  const KeyPartRow* row = RowOfKey(key_prefix, key);
  if (row == nullptr || pttl < 0 || row->holds == PartHolds::kNone) return out;
  if (row->value == PartValue::kString) {
    if (value.kind == Reply::Kind::kString && IsHold(*row, value.text)) {
      out.push_back({master, key, value.text, pttl});
    }
    return out;
  }
  if (value.kind != Reply::Kind::kArray) return out;
  for (size_t i = 0; i + 1 < value.elements.size(); i += 2) {
    const std::optional<int64_t> expiry = ScoreMs(value.elements[i + 1].text);
    if (!expiry || *expiry <= now_ms) continue;
    out.push_back({master, key, value.elements[i].text, std::min(*expiry - now_ms, pttl)});
  }
  return out;
}

namespace {

// {key, token} -> the copies of that grant.
std::map<std::pair<std::string, std::string>, std::vector<const LockCopy*>> ByGrant(
    const std::vector<LockCopy>& copies) {
  std::map<std::pair<std::string, std::string>, std::vector<const LockCopy*>> grants;
  for (const LockCopy& c : copies) {
    if (c.ttl_ms < 0) continue;
    grants[{c.key, c.token}].push_back(&c);
  }
  return grants;
}

}  // namespace

std::vector<Finding> PartialLeftovers(const std::vector<LockCopy>& copies, int quorum,
                                      const LiveGrants& live) {
  std::vector<Finding> out;
  for (const auto& [grant, held] : ByGrant(copies)) {
    if (static_cast<int>(held.size()) >= quorum || live.contains(grant)) continue;
    for (const LockCopy* c : held) {
      Finding f;
      f.master = c->master;
      f.key = c->key;
      f.kind = FindingKind::kPartial;
      f.ttl_ms = c->ttl_ms;
      f.redis_type = RedisTypeOf(RowToRead("", c->key));
      f.copies = static_cast<int>(held.size());
      out.push_back(std::move(f));
    }
  }
  return out;
}

Grants PartialGrants(const std::vector<LockCopy>& copies, int quorum) {
  Grants out;
  for (const auto& [grant, held] : ByGrant(copies)) {
    if (static_cast<int>(held.size()) < quorum) out.insert(grant);
  }
  return out;
}

void CarryFirstSeen(std::vector<Finding>& fresh, const std::vector<Finding>& previous,
                    int64_t now_unix_ms) {
  std::map<std::tuple<size_t, std::string, FindingKind>, int64_t> seen;
  for (const Finding& f : previous) seen[{f.master, f.key, f.kind}] = f.first_seen_unix_ms;
  for (Finding& f : fresh) {
    auto it = seen.find({f.master, f.key, f.kind});
    f.first_seen_unix_ms = it == seen.end() ? now_unix_ms : it->second;
  }
}

std::optional<ScanPassNews> NewsOfScanPass(std::string_view master,
                                           const std::string& previous_error,
                                           const std::string& error) {
  if (error == previous_error) return std::nullopt;
  const std::string of = "leak scan of " + std::string(master);
  if (error.empty()) return ScanPassNews{false, of + " works again"};
  return ScanPassNews{true, of + " failed: " + error +
                                " (said again only when it works again or fails otherwise)"};
}

}  // namespace lw
