#include "scan/leak_scanner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "core/key_parts.h"
#include "core/redlock_math.h"
#include "core/unix_time.h"
#include "redis/blocking_connection.h"

namespace lw {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Lock copies kept for the partial check; beyond this the check is skipped for the pass
// rather than letting a huge keyspace grow the agent's memory without bound.
constexpr size_t kMaxLockCopies = 200'000;
// Partial candidates re-read per pass.
constexpr size_t kMaxPartialRechecks = 1'000;

// Everything one master's part of a pass found.
struct MasterScan {
  MasterPass pass;
  std::vector<Finding> findings;
  std::vector<LockCopy> copies;
  bool copies_overflowed = false;
};

// One key as a master answered: its PTTL (nullopt: not an integer) and, for lock keys, the
// holds it shows (findings.h HoldsOf).
struct KeyRead {
  std::optional<int64_t> pttl;
  std::vector<LockCopy> holds;
};

// PTTL of every key; for keys under key_prefix also their part's ListCommand with scores
// (core/key_parts.h: GET, or ZRANGE WITHSCORES of a readers set), and the master's TIME once
// when a readers set is among them. One pipeline; an error text when the master could not be
// read.
std::variant<std::vector<KeyRead>, std::string> ReadKeys(BlockingConnection& conn, size_t master,
                                                         const std::string& key_prefix,
                                                         const std::vector<std::string>& keys) {
  std::vector<Command> commands;
  bool readers = false;
  for (const std::string& key : keys) {
    commands.push_back({"PTTL", key});
    if (!key.starts_with(key_prefix)) continue;
    const KeyPartRow& row = RowToRead(key_prefix, key);
    commands.push_back(ListCommand(row, key, kMaxReadersRead, /*scores=*/true));
    readers = readers || row.value == PartValue::kMembers;
  }
  if (readers) commands.push_back({"TIME"});
  auto replies = conn.Pipeline(commands);
  if (auto* error = std::get_if<std::string>(&replies)) return "PTTL: " + *error;
  const auto& rs = std::get<std::vector<Reply>>(replies);
  std::optional<int64_t> now_ms;
  if (readers) {
    now_ms = MasterNowMs(rs.back());
    if (!now_ms) return "TIME: unexpected reply";
  }
  std::vector<KeyRead> out(keys.size());
  size_t at = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const Reply& pttl = rs[at++];
    if (pttl.kind == Reply::Kind::kInteger) out[i].pttl = pttl.integer;
    if (!keys[i].starts_with(key_prefix)) continue;
    const Reply& value = rs[at++];
    if (out[i].pttl) {
      out[i].holds = HoldsOf(key_prefix, master, keys[i], value, *out[i].pttl, now_ms.value_or(0));
    }
  }
  return out;
}

class MasterScanner {
 public:
  MasterScanner(size_t index, BlockingConnection& conn, const ScanSettings& settings,
                const ScanHooks& hooks, MasterScan& out)
      : index_(index), conn_(conn), settings_(settings), hooks_(hooks), out_(out) {}

  // Scans every pattern; returns an error text on failure.
  std::optional<std::string> Run() {
    started_ = SteadyClock::now();
    std::vector<std::string> patterns = {PrefixPattern(settings_.key_prefix)};
    patterns.insert(patterns.end(), settings_.extra_patterns.begin(),
                    settings_.extra_patterns.end());
    for (size_t p = 0; p < patterns.size(); ++p) {
      // Extra patterns skip lock keys: the prefix pattern already covered them.
      if (auto error = ScanPattern(patterns[p], /*skip_lock_keys=*/p > 0)) return error;
    }
    return std::nullopt;
  }

 private:
  bool IsLockKey(const std::string& key) const { return key.starts_with(settings_.key_prefix); }
  bool IsFenceKey(const std::string& key) const {
    return key.starts_with(settings_.fence_prefix);
  }

  std::optional<std::string> ScanPattern(const std::string& pattern, bool skip_lock_keys) {
    std::string cursor = "0";
    const std::string count = std::to_string(settings_.batch);
    do {
      if (hooks_.stopping && hooks_.stopping()) return "stopped";
      auto reply = conn_.Run({"SCAN", cursor, "MATCH", pattern, "COUNT", count});
      if (auto* error = std::get_if<std::string>(&reply)) return "SCAN: " + *error;
      const Reply& r = std::get<Reply>(reply);
      if (r.kind == Reply::Kind::kError) return "SCAN: " + r.text;
      if (r.kind != Reply::Kind::kArray || r.elements.size() != 2) {
        return "SCAN: unexpected reply";
      }
      cursor = r.elements[0].text;
      std::vector<std::string> keys;
      for (const Reply& k : r.elements[1].elements) {
        if (!(skip_lock_keys && IsLockKey(k.text)) && !IsFenceKey(k.text)) {
          keys.push_back(k.text);
        }
      }
      if (auto error = Inspect(keys)) return error;
      const uint64_t returned = r.elements[1].elements.size();
      out_.pass.keys_scanned += returned;
      if (ScanMasterStats* stats = hooks_.stats ? hooks_.stats->master(index_) : nullptr) {
        stats->keys_scanned.Inc(static_cast<double>(returned));
      }
      // The budget counts the keys the master walked, not only those MATCH let through: a
      // SCAN call visits about COUNT keys however few match, and a lock-prefix scan of a
      // master full of other keys must be paced too.
      work_ += std::max<uint64_t>(returned, static_cast<uint64_t>(settings_.batch));
      if (hooks_.pause) {
        const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(
            SteadyClock::now() - started_);
        const auto delay = PaceDelay(work_, elapsed, settings_.keys_per_second);
        if (delay.count() > 0) hooks_.pause(delay);
      }
    } while (cursor != "0");
    return std::nullopt;
  }

  // PTTL and holds of every key (ReadKeys); TYPE for the few that turn out to be findings.
  std::optional<std::string> Inspect(const std::vector<std::string>& keys) {
    if (keys.empty()) return std::nullopt;
    auto read = ReadKeys(conn_, index_, settings_.key_prefix, keys);
    if (auto* error = std::get_if<std::string>(&read)) return *error;
    const auto& reads = std::get<std::vector<KeyRead>>(read);
    std::vector<Finding> found;
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::string& key = keys[i];
      const KeyRead& r = reads[i];
      if (!r.pttl) continue;
      const bool lock = IsLockKey(key);
      if (lock && *r.pttl != -2) ++out_.pass.lock_keys;
      if (auto kind = ClassifyTtl(*r.pttl, lock, settings_.max_ttl_ms)) {
        Finding f;
        f.master = index_;
        f.key = key;
        f.kind = *kind;
        f.ttl_ms = *r.pttl;
        found.push_back(std::move(f));
      }
      for (const LockCopy& copy : r.holds) {
        if (out_.copies.size() < kMaxLockCopies) {
          out_.copies.push_back(copy);
        } else {
          out_.copies_overflowed = true;
        }
      }
    }
    if (!found.empty()) {
      std::vector<Command> types;
      for (const Finding& f : found) types.push_back({"TYPE", f.key});
      auto typed = conn_.Pipeline(types);
      if (auto* error = std::get_if<std::string>(&typed)) return "TYPE: " + *error;
      const auto& ts = std::get<std::vector<Reply>>(typed);
      for (size_t i = 0; i < found.size(); ++i) found[i].redis_type = ts[i].text;
      out_.findings.insert(out_.findings.end(), found.begin(), found.end());
    }
    return std::nullopt;
  }

  size_t index_;
  BlockingConnection& conn_;
  const ScanSettings& settings_;
  const ScanHooks& hooks_;
  MasterScan& out_;
  SteadyClock::time_point started_;
  uint64_t work_ = 0;  // keys walked or returned so far, what the budget paces
};

// Reads the candidate keys again on every master at once, so that grants that were merely
// created or released while the masters were scanned one after another are not reported.
std::variant<std::vector<LockCopy>, std::string> Recheck(
    const std::vector<std::unique_ptr<BlockingConnection>>& conns, const std::string& key_prefix,
    const std::set<std::string>& keys) {
  const std::vector<std::string> list(keys.begin(), keys.end());
  std::vector<LockCopy> copies;
  for (size_t m = 0; m < conns.size(); ++m) {
    auto read = ReadKeys(*conns[m], m, key_prefix, list);
    if (auto* error = std::get_if<std::string>(&read)) return *error;
    for (KeyRead& r : std::get<std::vector<KeyRead>>(read)) {
      copies.insert(copies.end(), r.holds.begin(), r.holds.end());
    }
  }
  return copies;
}

void CheckPartials(const ScanSettings& settings, const ScanHooks& hooks,
                   const std::vector<std::unique_ptr<BlockingConnection>>& conns,
                   const std::vector<LockCopy>& copies, ScanReport& report) {
  const int quorum = QuorumSize(static_cast<int>(settings.masters.size()));
  // This agent's grants are filtered after the re-read, by asking it about what is left.
  std::set<std::string> candidates;
  for (const auto& [key, token] : PartialGrants(copies, quorum)) candidates.insert(key);
  if (candidates.size() > kMaxPartialRechecks) {
    report.partial_note = std::to_string(candidates.size()) + " candidates; checked the first " +
                          std::to_string(kMaxPartialRechecks);
    candidates.erase(std::next(candidates.begin(), kMaxPartialRechecks), candidates.end());
  }
  if (candidates.empty()) {
    report.partial_checked = true;
    return;
  }
  auto fresh = Recheck(conns, settings.key_prefix, candidates);
  if (auto* error = std::get_if<std::string>(&fresh)) {
    report.partial_note = "partial check failed: " + *error;
    return;
  }
  const Grants left = PartialGrants(std::get<std::vector<LockCopy>>(fresh), quorum);
  const std::optional<LiveGrants> live =
      !hooks.live || left.empty() ? std::optional(LiveGrants{}) : hooks.live(left);
  if (!live) {
    report.partial_note = "partial check skipped: this agent's own grants could not be read in "
                          "time (its event loop was busy), so its locks could not be told apart";
    return;
  }
  auto partial = PartialLeftovers(std::get<std::vector<LockCopy>>(fresh), quorum, *live);
  report.findings.insert(report.findings.end(), partial.begin(), partial.end());
  report.partial_checked = true;
}

// SCAN may return a key twice; keep one finding per (master, key, kind). A copy that is
// already a no_ttl or ttl_above_max finding is not also reported as partial.
void Dedupe(std::vector<Finding>& findings) {
  std::set<std::pair<size_t, std::string>> flagged;
  for (const Finding& f : findings) {
    if (f.kind != FindingKind::kPartial) flagged.insert({f.master, f.key});
  }
  std::erase_if(findings, [&](const Finding& f) {
    return f.kind == FindingKind::kPartial && flagged.contains({f.master, f.key});
  });
  std::sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    return std::tie(a.master, a.key, a.kind) < std::tie(b.master, b.key, b.kind);
  });
  findings.erase(std::unique(findings.begin(), findings.end(),
                             [](const Finding& a, const Finding& b) {
                               return a.master == b.master && a.key == b.key && a.kind == b.kind;
                             }),
                 findings.end());
}

}  // namespace

FindingCounts ScanReport::CountsFor(size_t master) const {
  FindingCounts counts;
  for (const Finding& f : findings) {
    if (f.master != master) continue;
    switch (f.kind) {
      case FindingKind::kNoTtl:
        ++counts.no_ttl;
        break;
      case FindingKind::kTtlAboveMax:
        ++counts.ttl_above_max;
        break;
      case FindingKind::kPartial:
        ++counts.partial;
        break;
    }
  }
  return counts;
}

ScanReport RunScanPass(const ScanSettings& settings, const ScanHooks& hooks) {
  ScanReport report;
  report.started_unix_ms = UnixMsNow();
  std::vector<std::unique_ptr<BlockingConnection>> conns;
  std::vector<LockCopy> copies;
  bool all_ok = true, overflow = false;
  for (size_t i = 0; i < settings.masters.size(); ++i) {
    MasterScan scan;
    scan.pass.master = settings.masters[i].Display();
    const auto started = SteadyClock::now();
    auto opened = BlockingConnection::Open(settings.masters[i], settings.connect_timeout,
                                  settings.command_timeout);
    if (auto* error = std::get_if<std::string>(&opened)) {
      scan.pass.error = *error;
    } else {
      auto& conn = std::get<std::unique_ptr<BlockingConnection>>(opened);
      if (auto failed = MasterScanner(i, *conn, settings, hooks, scan).Run()) {
        scan.pass.error = *failed;
      } else {
        scan.pass.ok = true;
        conns.push_back(std::move(conn));
      }
    }
    scan.pass.seconds = std::chrono::duration<double>(SteadyClock::now() - started).count();
    scan.pass.finished_unix_ms = UnixMsNow();
    all_ok = all_ok && scan.pass.ok;
    overflow = overflow || scan.copies_overflowed;
    report.findings.insert(report.findings.end(), scan.findings.begin(), scan.findings.end());
    copies.insert(copies.end(), scan.copies.begin(), scan.copies.end());
    report.masters.push_back(std::move(scan.pass));
  }
  if (!all_ok) {
    report.partial_note = "skipped: not every master could be scanned";
  } else if (overflow) {
    report.partial_note = "skipped: more than " + std::to_string(kMaxLockCopies) + " lock keys";
  } else if (!(hooks.stopping && hooks.stopping())) {
    CheckPartials(settings, hooks, conns, copies, report);
  }
  Dedupe(report.findings);
  report.finished_unix_ms = UnixMsNow();
  return report;
}

// ---- LeakScanner ------------------------------------------------------------------------------

LeakScanner::LeakScanner(ScanSettings settings, std::chrono::milliseconds interval,
                         ScanHooks::LiveFn live, ScanStats* stats)
    : settings_(std::move(settings)), interval_(interval), live_(std::move(live)), stats_(stats) {}

LeakScanner::~LeakScanner() { Stop(); }

void LeakScanner::Start() { thread_ = std::thread([this] { Loop(); }); }

void LeakScanner::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LeakScanner::Rescan() {
  {
    std::lock_guard lock(mu_);
    rescan_ = true;
  }
  wake_.notify_all();
}

void LeakScanner::Forget(size_t master, const std::string& key) {
  std::lock_guard lock(mu_);
  if (!latest_) return;
  auto copy = std::make_shared<ScanReport>(*latest_);
  std::erase_if(copy->findings,
                [&](const Finding& f) { return f.master == master && f.key == key; });
  latest_ = std::move(copy);
}

std::shared_ptr<const ScanReport> LeakScanner::Latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

void LeakScanner::Loop() {
  ScanHooks hooks;
  hooks.live = live_;
  hooks.stats = stats_;
  hooks.stopping = [this] {
    std::lock_guard lock(mu_);
    return stop_;
  };
  hooks.pause = [this](std::chrono::microseconds delay) {
    std::unique_lock lock(mu_);
    wake_.wait_for(lock, delay, [this] { return stop_; });
  };
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      rescan_ = false;
    }
    auto report = std::make_shared<ScanReport>(RunScanPass(settings_, hooks));
    if (hooks.stopping()) return;
    {
      std::lock_guard lock(mu_);
      if (latest_) CarryFirstSeen(report->findings, latest_->findings, report->finished_unix_ms);
      else CarryFirstSeen(report->findings, {}, report->finished_unix_ms);
      latest_ = report;
    }
    last_errors_.resize(report->masters.size());
    for (size_t i = 0; i < report->masters.size(); ++i) {
      const MasterPass& pass = report->masters[i];
      ScanMasterStats* stats = stats_ ? stats_->master(i) : nullptr;
      if (pass.ok) {
        if (stats) {
          stats->PassDone(pass.seconds, static_cast<double>(pass.finished_unix_ms) / 1000.0,
                          report->CountsFor(i));
        }
      } else if (stats) {
        stats->errors.Inc();
      }
      const std::string error = pass.ok ? "" : pass.error.empty() ? "unknown error" : pass.error;
      if (auto news = NewsOfScanPass(pass.master, last_errors_[i], error)) {
        if (news->warn) {
          spdlog::warn("{}", news->text);
        } else {
          spdlog::info("{}", news->text);
        }
      }
      last_errors_[i] = error;
    }
    // Log what is new, not the same leak every interval.
    for (const Finding& f : report->findings) {
      if (f.kind != FindingKind::kPartial && f.first_seen_unix_ms == report->finished_unix_ms) {
        spdlog::warn("leak scan: {} key on {}: {} (TTL {} ms, {})", FindingName(f.kind),
                     report->masters[f.master].master, f.key, f.ttl_ms, f.redis_type);
      }
    }
    std::unique_lock lock(mu_);
    wake_.wait_for(lock, interval_, [this] { return stop_ || rescan_; });
  }
}

}  // namespace lw
