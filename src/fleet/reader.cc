#include "fleet/reader.h"

#include <malloc.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/key_parts.h"
#include "core/redlock_math.h"
#include "core/scan_pace.h"
#include "core/unix_time.h"
#include "fleet/master_links.h"

namespace lw::fleet {

// A pass over the registry and every master's lock keys, made in one read or several.
struct Sweep {
  explicit Sweep(ViewSettings settings, size_t masters)
      : builder(std::make_unique<ViewBuilder>(std::move(settings))), status(masters) {}

  std::unique_ptr<ViewBuilder> builder;
  std::vector<MasterRead> status;  // per master: master, ok, error, seconds, keys_walked
  size_t master = 0;               // whose keys are walked now
  std::string cursor = "0";        // its SCAN cursor
  int64_t started_unix_ms = 0;
  int reads = 0;
  uint64_t walked = 0;             // keys walked, over all masters
  double seconds = 0;              // the time its reads took
  std::chrono::steady_clock::time_point last_read;  // when its last read ended
  std::chrono::steady_clock::duration last_took{};  // how long that read took
};

namespace {

using SteadyClock = std::chrono::steady_clock;

// Registry members whose entry expired longer ago than this are not read (their entries are
// gone; the index keeps them until a heartbeat prunes them).
constexpr int64_t kIndexSlackMs = 60'000;
// At most this many agents are read from one master's index.
constexpr int64_t kMaxAgents = 10'000;
// Members of one readers set read per master (each a read hold, a row of the view).
constexpr int64_t kMaxReaders = 1000;
// A read starts no sooner than this many times as long as the previous one took.
constexpr int kDutyFactor = 10;
// A sweep whose last read ended longer ago than this starts over.
constexpr auto kSweepIdle = std::chrono::seconds(60);

// Part of a sweep (fleet/reader.h), on the reader's thread: at its start, the registry of each
// master; then each master's lock keys in turn, SCAN batch by SCAN batch, from where the sweep's
// previous read stopped, until the read's budget of keys walked is spent. A batch's keys are
// read on every master at once (so the builder sees all copies of a key together) unless an
// earlier master holds the key: then that master's walk has read it already (a key created on
// it since is left to the next sweep). A master that fails is read no further in the sweep;
// what it said before counts.
class Walk {
 public:
  Walk(const ReaderSettings& settings, MasterLinks& links, Sweep& sweep,
       std::function<bool(std::chrono::microseconds)> pause)
      : settings_(settings), links_(links), sweep_(sweep), builder_(*sweep.builder),
        pause_(std::move(pause)), status_(sweep.status) {}

  // Reads until the budget is spent (at least one SCAN call) or the sweep ends: true then.
  bool Run(int64_t budget) {
    if (sweep_.reads++ == 0) ReadRegistry();
    int64_t left = budget;
    for (; sweep_.master < links_.size(); ++sweep_.master, sweep_.cursor = "0") {
      const size_t j = sweep_.master;
      if (!status_[j].ok) continue;
      const auto started = SteadyClock::now();
      const std::string error = ScanLocks(j, left);
      status_[j].seconds += Since(started);
      if (!error.empty()) {
        Fail(j, error);
        if (error == kStopped) return false;
        continue;
      }
      if (sweep_.cursor != "0") return false;  // the budget is spent mid-master
      if (left <= 0 && sweep_.master + 1 < links_.size()) {
        ++sweep_.master;
        sweep_.cursor = "0";
        return false;
      }
    }
    for (size_t i = 0; i < links_.size(); ++i) {
      if (status_[i].ok) links_.Worked(i);
    }
    return true;
  }

 private:
  static constexpr const char* kStopped = "stopped";

  void ReadRegistry() {
    std::vector<MasterRead> registry(links_.size());
    for (size_t i = 0; i < links_.size(); ++i) {
      status_[i].master = links_.Display(i);
      const auto started = SteadyClock::now();
      status_[i].error = ReadEntries(i, registry[i]);
      status_[i].ok = status_[i].error.empty();
      status_[i].seconds = Since(started);
      registry[i].ok = status_[i].ok;
    }
    ReadReports(registry);
    builder_.AddRegistry(registry);
  }

  static double Since(SteadyClock::time_point t) {
    return std::chrono::duration<double>(SteadyClock::now() - t).count();
  }

  void Fail(size_t i, const std::string& error) {
    status_[i].ok = false;
    if (status_[i].error.empty()) status_[i].error = error;
  }

  // The replies of `commands` on master i, or nullopt with the error in `error`.
  std::optional<std::vector<Reply>> Send(size_t i, const std::vector<Command>& commands,
                                         std::string& error) {
    auto replies = links_.Pipeline(i, commands);
    if (auto* e = std::get_if<std::string>(&replies)) {
      error = *e;
      return std::nullopt;
    }
    return std::move(std::get<std::vector<Reply>>(replies));
  }

  // Master i's registry entries (its index, then the entry of each member).
  std::string ReadEntries(size_t i, MasterRead& out) {
    std::string error;
    const std::string since = std::to_string(UnixMsNow() - kIndexSlackMs);
    auto ids = Send(i,
                    {{"ZRANGEBYSCORE", AgentsIndexKey(), since, "+inf", "LIMIT", "0",
                      std::to_string(kMaxAgents)}},
                    error);
    if (!ids) return error;
    if ((*ids)[0].kind != Reply::Kind::kArray) return Refused(i, (*ids)[0]);
    std::vector<std::string> members;
    std::vector<Command> gets;
    for (const Reply& id : (*ids)[0].elements) {
      if (!IsWellFormedAgentId(id.text)) continue;
      members.push_back(id.text);
      gets.push_back({"GET", AgentKey(id.text)});
    }
    if (gets.empty()) return "";
    auto values = Send(i, gets, error);
    if (!values) return error;
    for (size_t m = 0; m < members.size(); ++m) {
      const Reply& entry = (*values)[m];
      if (entry.kind != Reply::Kind::kString) continue;  // expired, or not ours
      std::optional<AgentRecord> record = DecodeAgentRecord(entry.text);
      if (!record || record->id != members[m]) continue;
      out.agents.push_back(std::move(*record));
    }
    return "";
  }

  // Each agent's holder report, read from one master: the one whose entry of it has the latest
  // heartbeat (the heartbeat that wrote that entry wrote or kept the report beside it, so no
  // master holds a newer one). A report is up to ~80 KB: read from every master, 1,000 agents'
  // would be tens of MB per master per read. A master that fails here leaves its agents
  // without a report in this read.
  void ReadReports(std::vector<MasterRead>& registry) {
    std::map<std::string, std::pair<int64_t, size_t>> freshest;  // id -> {heartbeat, master}
    for (size_t i = 0; i < registry.size(); ++i) {
      if (!registry[i].ok) continue;
      for (const AgentRecord& r : registry[i].agents) {
        auto [it, fresh] = freshest.try_emplace(r.id, r.heartbeat_unix_ms, i);
        if (!fresh && r.heartbeat_unix_ms > it->second.first) {
          it->second = {r.heartbeat_unix_ms, i};
        }
      }
    }
    std::set<std::string> missing;  // a report gone from its master (evicted, deleted)
    for (size_t i = 0; i < registry.size(); ++i) {
      std::vector<std::string> ids;
      for (const auto& [id, from] : freshest) {
        if (from.second == i) ids.push_back(id);
      }
      for (const std::string& id : ReportsFrom(i, ids, registry[i])) missing.insert(id);
    }
    // Those are read from every other master; the builder keeps the freshest.
    for (size_t i = 0; i < registry.size() && !missing.empty(); ++i) {
      std::vector<std::string> ids;
      for (const std::string& id : missing) {
        if (freshest.at(id).second != i) ids.push_back(id);
      }
      ReportsFrom(i, ids, registry[i]);
    }
  }

  // The reports of `ids` on master i (when it is ok) into `out`; returns the ids it has none of.
  std::vector<std::string> ReportsFrom(size_t i, const std::vector<std::string>& ids,
                                       MasterRead& out) {
    if (ids.empty() || !status_[i].ok) return {};
    std::vector<Command> gets;
    for (const std::string& id : ids) gets.push_back({"GET", HoldersKey(id)});
    std::string error;
    auto values = Send(i, gets, error);
    if (!values) {
      Fail(i, error);
      return {};
    }
    std::vector<std::string> none;
    for (size_t n = 0; n < ids.size(); ++n) {
      const Reply& report = (*values)[n];
      std::optional<HolderReport> r;
      if (report.kind == Reply::Kind::kString) r = DecodeHolderReport(report.text);
      if (r) {
        out.reports.emplace_back(ids[n], std::move(*r));
      } else {
        none.push_back(ids[n]);
      }
    }
    return none;
  }

  // Master j's keys from the sweep's cursor, until its SCAN ends (cursor "0") or `left` keys
  // walked are spent (each call counts at least COUNT: it visits about that many keys however
  // few match); the cursor stays in the sweep. The error, if any.
  std::string ScanLocks(size_t j, int64_t& left) {
    const std::string pattern = PrefixPattern(settings_.key_prefix);
    const std::string count = std::to_string(settings_.batch);
    const auto started = SteadyClock::now();
    uint64_t work = 0;
    std::string& cursor = sweep_.cursor;
    std::string error;
    do {
      auto scanned = Send(j, {{"SCAN", cursor, "MATCH", pattern, "COUNT", count}}, error);
      if (!scanned) return error;
      const Reply& r = (*scanned)[0];
      if (r.kind != Reply::Kind::kArray || r.elements.size() != 2) return Refused(j, r);
      cursor = r.elements[0].text;
      const uint64_t returned = r.elements[1].elements.size();
      status_[j].keys_walked += returned;
      if (returned > 0) ReadBatch(j, r.elements[1].elements);
      if (!status_[j].ok) return status_[j].error;
      // Paced on the keys the master walked (as the leak scanner does).
      const uint64_t walked = std::max<uint64_t>(returned, static_cast<uint64_t>(settings_.batch));
      work += walked;
      left -= static_cast<int64_t>(walked);
      sweep_.walked += walked;
      const auto elapsed =
          std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - started);
      const auto delay = PaceDelay(work, elapsed, settings_.keys_per_second);
      if (delay.count() > 0 && !pause_(delay)) return kStopped;
    } while (cursor != "0" && left > 0);
    return "";
  }

  // The keys master j's SCAN returned that no earlier master holds, read on every master.
  void ReadBatch(size_t j, const std::vector<Reply>& scanned) {
    std::vector<std::string> keys;
    for (const Reply& k : scanned) keys.push_back(k.text);
    for (size_t i = 0; i < j && !keys.empty(); ++i) {
      if (status_[i].ok) keys = NotOn(i, std::move(keys));
    }
    if (keys.empty()) return;
    std::vector<MasterRead> batch(links_.size());
    for (size_t i = 0; i < links_.size(); ++i) {
      if (!status_[i].ok) continue;
      std::string error;
      if (ReadCopies(i, keys, batch[i], error)) {
        batch[i].ok = true;
      } else {
        Fail(i, error);
      }
    }
    builder_.AddCopies(batch);
  }

  // The keys of `keys` that master i does not hold (all of them if it fails).
  std::vector<std::string> NotOn(size_t i, std::vector<std::string> keys) {
    std::vector<Command> exists;
    for (const std::string& k : keys) exists.push_back({"EXISTS", k});
    std::string error;
    auto replies = Send(i, exists, error);
    if (!replies) {
      Fail(i, error);
      return keys;
    }
    std::vector<std::string> out;
    for (size_t n = 0; n < keys.size(); ++n) {
      const Reply& r = (*replies)[n];
      if (!(r.kind == Reply::Kind::kInteger && r.integer > 0)) out.push_back(std::move(keys[n]));
    }
    return out;
  }

  // Each key's ListCommand with scores (core/key_parts.h: GET, or ZRANGE WITHSCORES of a
  // readers set, at most kMaxReaders members) + PTTL, and the master's TIME once per batch
  // when a readers set is among them, to tell each reader's validity from its score.
  bool ReadCopies(size_t i, const std::vector<std::string>& keys, MasterRead& out,
                  std::string& error) {
    std::vector<Command> commands;
    bool readers = false;
    std::vector<bool> is_readers;
    for (const std::string& k : keys) {
      const KeyPartRow& row = RowToRead(settings_.key_prefix, k);
      is_readers.push_back(row.value == PartValue::kMembers);
      readers = readers || is_readers.back();
      commands.push_back(ListCommand(row, k, kMaxReaders, /*scores=*/true));
      commands.push_back({"PTTL", k});
    }
    if (readers) commands.push_back({"TIME"});
    auto replies = Send(i, commands, error);
    if (!replies) return false;
    const std::optional<int64_t> now_ms = readers ? MasterMs(replies->back()) : std::nullopt;
    if (readers && !now_ms) {
      error = links_.Display(i) + ": TIME: unexpected reply";
      return false;
    }
    for (size_t n = 0; n < keys.size(); ++n) {
      const Reply& value = (*replies)[2 * n];
      const Reply& pttl = (*replies)[2 * n + 1];
      // Gone since SCAN saw it (-2), or of a type no lock has: skipped.
      if (pttl.kind != Reply::Kind::kInteger || pttl.integer < -1) continue;
      if (is_readers[n]) {
        for (auto& copy : ReaderCopies(keys[n], value, pttl.integer, *now_ms)) {
          out.copies.push_back(std::move(copy));
        }
      } else if (value.kind == Reply::Kind::kString) {
        out.copies.push_back({keys[n], value.text, pttl.integer});
      }
    }
    return true;
  }

  // The master's clock from its TIME reply, in ms since the epoch.
  static std::optional<int64_t> MasterMs(const Reply& time) {
    if (time.kind != Reply::Kind::kArray || time.elements.size() != 2) return std::nullopt;
    try {
      return std::stoll(time.elements[0].text) * 1000 + std::stoll(time.elements[1].text) / 1000;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }

  std::string Refused(size_t i, const Reply& r) {
    const std::string error =
        links_.Display(i) + ": " + (r.kind == Reply::Kind::kError ? r.text : "unexpected reply");
    links_.Failed(i, error);
    return error;
  }

  const ReaderSettings& settings_;
  MasterLinks& links_;
  Sweep& sweep_;
  ViewBuilder& builder_;
  std::function<bool(std::chrono::microseconds)> pause_;  // false: stop reading
  std::vector<MasterRead>& status_;  // per master: master, ok, error, seconds, keys_walked
};

// What a view says of the sweep that made it; read_unix_ms is when its last read ended (a view
// asked for before that may be it).
void Stamp(FleetView& view, const Sweep& sweep, bool partial) {
  view.read_unix_ms = UnixMsNow();
  view.read_started_unix_ms = sweep.started_unix_ms;
  view.reads = sweep.reads;
  view.keys_walked = sweep.walked;
  view.partial = partial;
}

void SetTotals(const FleetView& view, FleetTotals& totals) {
  double drifted = 0, waiters = 0;
  for (const FleetAgent& a : view.agents) {
    drifted += a.drift.empty() ? 0 : 1;
    waiters += static_cast<double>(a.waiters_total);
  }
  // Every row of the read counts, kept or not; a minority copy is the leak scanner's business.
  totals.agents.Set(static_cast<double>(view.agents.size()));
  totals.agents_drifted.Set(drifted);
  totals.locks.Set(static_cast<double>(view.counts.locks));
  totals.locks_orphaned.Set(static_cast<double>(view.counts.gone));
  totals.locks_stuck.Set(static_cast<double>(view.counts.stuck));
  totals.oldest_stuck.Set(static_cast<double>(std::max<int64_t>(view.counts.oldest_stuck_held_ms, 0)) /
                          1000.0);
  totals.waiters.Set(waiters);
  int64_t oldest_wait_ms = 0;
  for (const Deadlock& d : view.deadlocks) oldest_wait_ms = std::max(oldest_wait_ms, d.oldest_wait_ms);
  totals.deadlocks.Set(static_cast<double>(view.deadlocks.size()));
  totals.deadlock_oldest_wait.Set(static_cast<double>(oldest_wait_ms) / 1000.0);
  totals.read_timestamp.Set(static_cast<double>(view.read_unix_ms) / 1000.0);
}

}  // namespace

FleetReader::FleetReader(ReaderSettings settings, FleetStats* stats)
    : settings_(std::move(settings)), stats_(stats) {}

FleetReader::~FleetReader() { Stop(); }

void FleetReader::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Run(); });
}

void FleetReader::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  done_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const FleetView> FleetReader::View(int64_t newer_than_unix_ms,
                                                   std::chrono::milliseconds wait,
                                                   const std::string& prefix) {
  std::unique_lock lock(mu_);
  asks_[prefix] = SteadyClock::now();
  const auto fits = [&] {
    return latest_ != nullptr && latest_->read_unix_ms > newer_than_unix_ms &&
           RowsComplete(*latest_, prefix);
  };
  if (fits() && !latest_->partial && SteadyClock::now() - latest_at_ < settings_.refresh) {
    return latest_;
  }
  const std::shared_ptr<const FleetView> before = latest_;
  wanted_ = true;
  wake_.notify_all();
  ++waiting_;
  done_.wait_for(lock, wait, [&] { return stopping_ || (latest_ != before && fits()); });
  --waiting_;
  return latest_;
}

std::vector<std::string> FleetReader::Asks() {
  const auto now = SteadyClock::now();
  std::erase_if(asks_, [&](const auto& ask) { return now - ask.second > kAskFor; });
  std::vector<std::pair<SteadyClock::time_point, std::string>> recent;
  for (const auto& [prefix, at] : asks_) {
    if (!prefix.empty()) recent.emplace_back(at, prefix);
  }
  std::sort(recent.begin(), recent.end(), std::greater<>());  // the most recent first
  std::vector<std::string> out = {""};
  for (const auto& [at, prefix] : recent) {
    if (out.size() >= kMaxAsks) {
      asks_.erase(prefix);
      continue;
    }
    out.push_back(prefix);
  }
  return out;
}

std::shared_ptr<const FleetView> FleetReader::Latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

void FleetReader::KeepFresh(bool on) {
  {
    std::lock_guard lock(mu_);
    keep_fresh_ = on;
  }
  wake_.notify_all();
}

SweepProgress FleetReader::Progress() const {
  std::lock_guard lock(mu_);
  return progress_;
}

void FleetReader::Run() {
  MasterLinks links(settings_.masters, settings_.connect_timeout, settings_.command_timeout,
                    "fleet read");
  std::optional<SteadyClock::time_point> last_start;
  SteadyClock::duration last_took{};
  while (true) {
    bool keep_fresh = false;
    std::vector<std::string> asks;
    {
      std::unique_lock lock(mu_);
      // A read starts when asked for (or kept fresh), and never sooner than refresh after the
      // previous one started, nor sooner than kDutyFactor times as long as that one took: with
      // a keyspace so large that a read takes longer than refresh / kDutyFactor, reads keep to
      // 1 / kDutyFactor of the reader's time and of the masters' walk.
      wake_.wait(lock, [&] { return stopping_ || wanted_ || keep_fresh_; });
      if (last_start) {
        const auto gap = std::max<SteadyClock::duration>(settings_.refresh, kDutyFactor * last_took);
        wake_.wait_until(lock, *last_start + gap, [&] { return stopping_; });
      }
      if (stopping_) return;
      if (!wanted_ && !keep_fresh_) continue;
      wanted_ = false;
      keep_fresh = keep_fresh_;
      asks = Asks();
    }
    last_start = SteadyClock::now();
    std::shared_ptr<const FleetView> view = Read(links, std::move(asks));
    last_took = SteadyClock::now() - *last_start;
    // The read's batches and reports are freed: give their pages back, so that the agent's
    // RSS is what it keeps (the view), not the largest read it made.
    malloc_trim(0);
    if (keep_fresh && stats_ && view && view->complete && !view->partial) {
      SetTotals(*view, stats_->totals);
    }
    {
      std::lock_guard lock(mu_);
      if (view) {
        latest_ = std::move(view);
        latest_at_ = SteadyClock::now();
      }
      progress_ = {};
      if (sweep_) {
        progress_ = {true, sweep_->started_unix_ms, sweep_->reads, sweep_->walked,
                     sweep_->master, settings_.masters.size()};
        wanted_ = wanted_ || waiting_ > 0;  // it goes on while someone waits for a view
      }
    }
    done_.notify_all();
  }
}

std::shared_ptr<const FleetView> FleetReader::Read(MasterLinks& links,
                                                   std::vector<std::string> asks) {
  // A sweep nobody advanced for longer than the pacing explains is stale (its registry, its
  // ages): it starts over.
  if (sweep_ && SteadyClock::now() - sweep_->last_read >
                    std::max<SteadyClock::duration>(kSweepIdle, 2 * kDutyFactor * sweep_->last_took)) {
    sweep_.reset();
  }
  if (!sweep_) {
    ViewSettings view;
    view.key_prefix = settings_.key_prefix;
    view.stuck_after_ms = settings_.stuck_after_ms;
    view.now_unix_ms = UnixMsNow();
    view.masters = static_cast<int>(links.size());
    view.asks = std::move(asks);
    view.keep = kKeptRows;
    sweep_ = std::make_unique<Sweep>(std::move(view), links.size());
    sweep_->started_unix_ms = UnixMsNow();
  }
  const auto started = SteadyClock::now();
  const auto pause = [this](std::chrono::microseconds delay) {
    std::unique_lock lock(mu_);
    return !wake_.wait_for(lock, delay, [this] { return stopping_; });
  };
  const bool ended = Walk(settings_, links, *sweep_, pause).Run(settings_.read_budget);
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - started).count();
  sweep_->seconds += seconds;
  sweep_->last_read = SteadyClock::now();
  sweep_->last_took = sweep_->last_read - started;
  if (stats_) {
    stats_->own.reads.Inc();
    stats_->own.read_duration.Set(seconds);
  }
  if (!ended) {
    bool whole_published;
    {
      std::lock_guard lock(mu_);
      whole_published = latest_ != nullptr && !latest_->partial;
    }
    if (whole_published) return nullptr;
    FleetView part = sweep_->builder->Snapshot(sweep_->status, sweep_->seconds);
    Stamp(part, *sweep_, /*partial=*/true);
    return std::make_shared<const FleetView>(std::move(part));
  }
  if (stats_) {
    for (const MasterRead& m : sweep_->status) {
      if (!m.ok) stats_->own.read_errors.Inc();
    }
  }
  FleetView out = sweep_->builder->Finish(std::move(sweep_->status), sweep_->seconds);
  out.deadlocks = Confirmed(std::move(out.deadlocks), deadlocks_seen_);
  Stamp(out, *sweep_, /*partial=*/false);
  sweep_.reset();
  return std::make_shared<const FleetView>(std::move(out));
}

}  // namespace lw::fleet
