#include "scan/findings.h"

#include <map>
#include <tuple>

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
      f.redis_type = "string";
      f.copies = static_cast<int>(held.size());
      out.push_back(std::move(f));
    }
  }
  return out;
}

std::set<std::string> PartialCandidates(const std::vector<LockCopy>& copies, int quorum,
                                        const LiveGrants& live) {
  std::set<std::string> keys;
  for (const Finding& f : PartialLeftovers(copies, quorum, live)) keys.insert(f.key);
  return keys;
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

}  // namespace lw
