#include "fleet/reader.h"

#include <algorithm>

#include "core/key_parts.h"
#include "core/redlock_math.h"
#include "core/scan_pace.h"
#include "core/unix_time.h"
#include "fleet/master_links.h"

namespace lw::fleet {
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

// One read of one master, on the reader's thread.
class MasterReader {
 public:
  MasterReader(const ReaderSettings& settings, MasterLinks& links, size_t index,
               std::function<bool(std::chrono::microseconds)> pause)
      : settings_(settings), links_(links), index_(index), pause_(std::move(pause)) {}

  MasterRead Read() {
    MasterRead out;
    out.master = links_.Display(index_);
    const auto started = SteadyClock::now();
    std::string error = ReadRegistry(out);
    if (error.empty()) error = ScanLocks(out);
    out.ok = error.empty();
    out.error = error;
    out.seconds = std::chrono::duration<double>(SteadyClock::now() - started).count();
    if (out.ok) links_.Worked(index_);
    return out;
  }

 private:
  // The replies of `commands`, or "" with the error in `error`.
  std::optional<std::vector<Reply>> Send(const std::vector<Command>& commands,
                                         std::string& error) {
    auto replies = links_.Pipeline(index_, commands);
    if (auto* e = std::get_if<std::string>(&replies)) {
      error = *e;
      return std::nullopt;
    }
    return std::move(std::get<std::vector<Reply>>(replies));
  }

  std::string ReadRegistry(MasterRead& out) {
    std::string error;
    const std::string since = std::to_string(UnixMsNow() - kIndexSlackMs);
    auto ids = Send({{"ZRANGEBYSCORE", AgentsIndexKey(), since, "+inf", "LIMIT", "0",
                      std::to_string(kMaxAgents)}},
                    error);
    if (!ids) return error;
    if ((*ids)[0].kind != Reply::Kind::kArray) return Refused((*ids)[0]);
    std::vector<std::string> members;
    std::vector<Command> gets;
    for (const Reply& id : (*ids)[0].elements) {
      if (!IsWellFormedAgentId(id.text)) continue;
      members.push_back(id.text);
      gets.push_back({"GET", AgentKey(id.text)});
      gets.push_back({"GET", HoldersKey(id.text)});
    }
    if (gets.empty()) return "";
    auto values = Send(gets, error);
    if (!values) return error;
    for (size_t i = 0; i < members.size(); ++i) {
      const Reply& entry = (*values)[2 * i];
      const Reply& report = (*values)[2 * i + 1];
      if (entry.kind != Reply::Kind::kString) continue;  // expired, or not ours
      std::optional<AgentRecord> record = DecodeAgentRecord(entry.text);
      if (!record || record->id != members[i]) continue;
      out.agents.push_back(std::move(*record));
      if (report.kind != Reply::Kind::kString) continue;
      if (std::optional<HolderReport> r = DecodeHolderReport(report.text)) {
        out.reports.emplace_back(members[i], std::move(*r));
      }
    }
    return "";
  }

  std::string ScanLocks(MasterRead& out) {
    const std::string pattern = PrefixPattern(settings_.key_prefix);
    const std::string count = std::to_string(settings_.batch);
    const auto started = SteadyClock::now();
    uint64_t work = 0;
    std::string cursor = "0", error;
    do {
      auto scanned = Send({{"SCAN", cursor, "MATCH", pattern, "COUNT", count}}, error);
      if (!scanned) return error;
      const Reply& r = (*scanned)[0];
      if (r.kind != Reply::Kind::kArray || r.elements.size() != 2) return Refused(r);
      cursor = r.elements[0].text;
      if (!r.elements[1].elements.empty() && !ReadCopies(r.elements[1].elements, out, error)) {
        return error;
      }
      const uint64_t returned = r.elements[1].elements.size();
      out.keys_walked += returned;
      // Paced on the keys the master walked: a SCAN call visits about COUNT keys however few
      // match (as the leak scanner does).
      work += std::max<uint64_t>(returned, static_cast<uint64_t>(settings_.batch));
      const auto elapsed =
          std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - started);
      const auto delay = PaceDelay(work, elapsed, settings_.keys_per_second);
      if (delay.count() > 0 && !pause_(delay)) return "stopped";
    } while (cursor != "0");
    return "";
  }

  // Each key's ListCommand with scores (core/key_parts.h: GET, or ZRANGE WITHSCORES of a
  // readers set, at most kMaxReaders members) + PTTL, and the master's TIME once per batch
  // when a readers set is among them, to tell each reader's validity from its score.
  bool ReadCopies(const std::vector<Reply>& keys, MasterRead& out, std::string& error) {
    std::vector<Command> commands;
    bool readers = false;
    std::vector<bool> is_readers;
    for (const Reply& k : keys) {
      const KeyPartRow& row = RowToRead(settings_.key_prefix, k.text);
      is_readers.push_back(row.value == PartValue::kMembers);
      readers = readers || is_readers.back();
      commands.push_back(ListCommand(row, k.text, kMaxReaders, /*scores=*/true));
      commands.push_back({"PTTL", k.text});
    }
    if (readers) commands.push_back({"TIME"});
    auto replies = Send(commands, error);
    if (!replies) return false;
    const std::optional<int64_t> now_ms = readers ? MasterMs(replies->back()) : std::nullopt;
    if (readers && !now_ms) {
      error = links_.Display(index_) + ": TIME: unexpected reply";
      return false;
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      const Reply& value = (*replies)[2 * i];
      const Reply& pttl = (*replies)[2 * i + 1];
      // Gone since SCAN saw it (-2), or of a type no lock has: skipped.
      if (pttl.kind != Reply::Kind::kInteger || pttl.integer < -1) continue;
      if (is_readers[i]) {
        for (auto& copy : ReaderCopies(keys[i].text, value, pttl.integer, *now_ms)) {
          out.copies.push_back(std::move(copy));
        }
      } else if (value.kind == Reply::Kind::kString) {
        out.copies.push_back({keys[i].text, value.text, pttl.integer});
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

  std::string Refused(const Reply& r) {
    const std::string error =
        links_.Display(index_) + ": " + (r.kind == Reply::Kind::kError ? r.text : "unexpected reply");
    links_.Failed(index_, error);
    return error;
  }

  const ReaderSettings& settings_;
  MasterLinks& links_;
  size_t index_;
  std::function<bool(std::chrono::microseconds)> pause_;  // false: stop reading
};

void SetTotals(const FleetView& view, FleetTotals& totals) {
  double drifted = 0, locks = 0, gone = 0, stuck = 0, oldest = 0, waiters = 0;
  for (const FleetAgent& a : view.agents) {
    drifted += a.drift.empty() ? 0 : 1;
    waiters += static_cast<double>(a.waiters_total);
  }
  for (const FleetLock& l : view.locks) {
    if (!l.quorum) continue;  // a minority copy is the leak scanner's business
    ++locks;
    gone += l.state == HolderState::kGone ? 1 : 0;
    if (l.stuck_reason.empty()) continue;
    ++stuck;
    oldest = std::max(oldest, static_cast<double>(std::max<int64_t>(l.held_ms, 0)) / 1000.0);
  }
  totals.agents.Set(static_cast<double>(view.agents.size()));
  totals.agents_drifted.Set(drifted);
  totals.locks.Set(locks);
  totals.locks_orphaned.Set(gone);
  totals.locks_stuck.Set(stuck);
  totals.oldest_stuck.Set(oldest);
  totals.waiters.Set(waiters);
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
                                                   std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  const auto fits = [&] {
    return latest_ != nullptr && latest_->read_unix_ms > newer_than_unix_ms;
  };
  if (fits() && SteadyClock::now() - latest_at_ < settings_.refresh) return latest_;
  const std::shared_ptr<const FleetView> before = latest_;
  wanted_ = true;
  wake_.notify_all();
  done_.wait_for(lock, wait, [&] { return stopping_ || (latest_ != before && fits()); });
  return latest_;
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

void FleetReader::Run() {
  MasterLinks links(settings_.masters, settings_.connect_timeout, settings_.command_timeout,
                    "fleet read");
  std::optional<SteadyClock::time_point> last_start;
  SteadyClock::duration last_took{};
  while (true) {
    bool keep_fresh = false;
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
    }
    last_start = SteadyClock::now();
    auto view = std::make_shared<const FleetView>(Read(links));
    last_took = SteadyClock::now() - *last_start;
    if (keep_fresh && stats_ && view->complete) SetTotals(*view, stats_->totals);
    {
      std::lock_guard lock(mu_);
      latest_ = std::move(view);
      latest_at_ = SteadyClock::now();
    }
    done_.notify_all();
  }
}

FleetView FleetReader::Read(MasterLinks& links) {
  const auto started = SteadyClock::now();
  const auto pause = [this](std::chrono::microseconds delay) {
    std::unique_lock lock(mu_);
    return !wake_.wait_for(lock, delay, [this] { return stopping_; });
  };
  ViewInputs in;
  in.key_prefix = settings_.key_prefix;
  in.stuck_after_ms = settings_.stuck_after_ms;
  for (size_t i = 0; i < links.size(); ++i) {
    in.masters.push_back(MasterReader(settings_, links, i, pause).Read());
    if (stats_ && !in.masters.back().ok) stats_->own.read_errors.Inc();
  }
  in.read_seconds = std::chrono::duration<double>(SteadyClock::now() - started).count();
  in.now_unix_ms = UnixMsNow();
  if (stats_) {
    stats_->own.reads.Inc();
    stats_->own.read_duration.Set(in.read_seconds);
  }
  return BuildView(std::move(in));
}

}  // namespace lw::fleet
