#include "fleet/presence.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <set>

#include "core/redlock_math.h"
#include "core/unix_time.h"
#include "fleet/master_links.h"
#include "redis/scripts.h"

namespace lw::fleet {
namespace {

// Index members whose entry expired this long ago are pruned by every heartbeat.
constexpr int64_t kIndexPruneAfterMs = 10 * 60 * 1000;

// The heartbeat's state across beats, on the presence thread.
class Heartbeat {
 public:
  Heartbeat(const PresenceSettings& settings, FleetStats* stats)
      : settings_(settings),
        stats_(stats),
        links_(settings.masters, settings.connect_timeout, settings.command_timeout,
               "fleet heartbeat"),
        written_(settings.masters.size()),
        holds_reporter_(settings.masters.size(), false) {}

  // One heartbeat on every master. Returns whether this agent holds the reporter key on a
  // quorum, or nullopt when no master took the heartbeat. Sets *all_mark: whether a quorum of
  // masters answered and none listed a live agent that does not mark read holds.
  std::optional<bool> Beat(const std::optional<HolderReport>& report, bool* all_mark,
                           bool* registered) {
    const int64_t now = UnixMsNow();
    if (report) {
      HolderReport content = *report;
      content.unix_ms = 0;  // the time it was taken is not a change of content
      const std::string text = Encode(content);
      if (text != content_) {
        content_ = text;
        HolderReport stamped = *report;
        stamped.unix_ms = now;
        report_text_ = Encode(stamped);
      }
    }
    AgentRecord record = settings_.record;
    record.heartbeat_unix_ms = now;
    record.heartbeat_ttl_ms = settings_.heartbeat_ttl.count();
    const std::string entry = Encode(record);
    int reached = 0, reporter = 0;
    bool unmarked = false;
    for (size_t i = 0; i < links_.size(); ++i) {
      if (BeatOn(i, entry, now, &unmarked)) ++reached;
      reporter += holds_reporter_[i] ? 1 : 0;
    }
    *registered = reached >= QuorumSize(static_cast<int>(links_.size()));
    *all_mark = settings_.marks_readers && !unmarked && *registered;
    if (stats_) {
      if (reached > 0) stats_->own.heartbeats.Inc();
      stats_->own.heartbeat_errors.Inc(static_cast<double>(links_.size() - reached));
    }
    const bool quorum = reporter >= QuorumSize(static_cast<int>(links_.size()));
    if (!quorum && reporter > 0) LetGoOfReporter();  // a split vote: let another round decide
    if (reached == 0) return std::nullopt;
    return quorum;
  }

  // Deletes the entry, the report, the index member and the reporter key (if ours) everywhere.
  void Deregister() {
    const std::string& id = settings_.record.id;
    const std::vector<Command> commands = {
        {"DEL", AgentKey(id), HoldersKey(id)},
        {"ZREM", AgentsIndexKey(), id},
        {"ZREM", MarkingIndexKey(), id},
        {"EVAL", scripts::kDeleteIfHeld, "1", ReporterKey(), id, ""}};
    for (size_t i = 0; i < links_.size(); ++i) {
      auto replies = links_.Pipeline(i, commands);
      if (auto* error = std::get_if<std::string>(&replies)) {
        spdlog::warn("fleet: could not remove this agent's entry from {}: {} (it expires within "
                     "heartbeat_ttl)", links_.Display(i), *error);
      }
    }
  }

 private:
  std::string Ttl() const { return std::to_string(settings_.heartbeat_ttl.count()); }

  // *unmarked: set when this master lists a live agent that does not mark read holds.
  bool BeatOn(size_t i, const std::string& entry, int64_t now, bool* unmarked) {
    const std::string& id = settings_.record.id;
    const int64_t ttl = settings_.heartbeat_ttl.count();
    std::vector<Command> commands = {
        {"SET", AgentKey(id), entry, "PX", Ttl()},
        {"ZADD", AgentsIndexKey(), std::to_string(now + ttl), id},
        {"ZREMRANGEBYSCORE", AgentsIndexKey(), "-inf", std::to_string(now - kIndexPruneAfterMs)},
        // Nothing of the fleet lives forever: the index goes once no agent refreshes it.
        {"PEXPIRE", AgentsIndexKey(), std::to_string(kIndexPruneAfterMs)},
        {"SET", ReporterKey(), id, "NX", "PX", Ttl()},
        {"EVAL", scripts::kExtendIfHeld, "1", ReporterKey(), id, Ttl()}};
    const bool rewrite = !report_text_.empty() && written_[i] != report_text_;
    if (rewrite) {
      commands.push_back({"SET", HoldersKey(id), report_text_, "PX", Ttl()});
    } else {
      commands.push_back({"PEXPIRE", HoldersKey(id), Ttl()});
    }
    const size_t layout_at = commands.size();
    if (settings_.marks_readers) {
      commands.push_back({"ZADD", MarkingIndexKey(), std::to_string(now + ttl), id});
      commands.push_back(
          {"ZREMRANGEBYSCORE", MarkingIndexKey(), "-inf", std::to_string(now - kIndexPruneAfterMs)});
      commands.push_back({"PEXPIRE", MarkingIndexKey(), std::to_string(kIndexPruneAfterMs)});
      // Whole, scores and all (ZRANGE BYSCORE needs Redis 6.2): an index is one entry per agent.
      commands.push_back({"ZRANGE", AgentsIndexKey(), "0", "-1", "WITHSCORES"});
      commands.push_back({"ZRANGE", MarkingIndexKey(), "0", "-1", "WITHSCORES"});
    } else {
      // Unmarked (mark_readers = false, reloaded so): no entry of an earlier run may say otherwise.
      commands.push_back({"ZREM", MarkingIndexKey(), id});
    }
    auto replies = links_.Pipeline(i, commands);
    if (std::holds_alternative<std::string>(replies)) {
      holds_reporter_[i] = false;
      written_[i].clear();
      return false;
    }
    const auto& rs = std::get<std::vector<Reply>>(replies);
    if (const std::string error = FirstError(rs); !error.empty()) {
      links_.Failed(i, links_.Display(i) + ": " + error);
      holds_reporter_[i] = false;
      written_[i].clear();
      return false;
    }
    links_.Worked(i);
    holds_reporter_[i] = rs[4].kind == Reply::Kind::kStatus ||
                         (rs[5].kind == Reply::Kind::kInteger && rs[5].integer == 1);
    if (rewrite) written_[i] = report_text_;
    if (settings_.marks_readers && rs.size() >= layout_at + 5) {
      const std::set<std::string> marking = Live(rs[layout_at + 4], now);
      for (const std::string& agent : Live(rs[layout_at + 3], now)) {
        if (!marking.count(agent)) *unmarked = true;
      }
    }
    return true;
  }

  // The members of an index read WITHSCORES whose entry has not expired at `now` (unix ms).
  static std::set<std::string> Live(const Reply& index, int64_t now) {
    std::set<std::string> out;
    for (size_t i = 0; i + 1 < index.elements.size(); i += 2) {
      const std::string& score = index.elements[i + 1].text;
      char* end = nullptr;
      const double expires = std::strtod(score.c_str(), &end);
      if (end == score.c_str() || expires > static_cast<double>(now)) {
        out.insert(index.elements[i].text);  // unreadable: counted as live
      }
    }
    return out;
  }

  void LetGoOfReporter() {
    for (size_t i = 0; i < links_.size(); ++i) {
      if (!holds_reporter_[i]) continue;
      holds_reporter_[i] = false;
      (void)links_.Pipeline(
          i, {{"EVAL", scripts::kDeleteIfHeld, "1", ReporterKey(), settings_.record.id, ""}});
    }
  }

  const PresenceSettings& settings_;
  FleetStats* stats_;
  MasterLinks links_;
  std::string content_;      // the last report's content (without its time)
  std::string report_text_;  // the last report as written
  std::vector<std::string> written_;  // per master: the report text it holds ("" unknown)
  std::vector<bool> holds_reporter_;  // per master: its reporter key is ours
};

}  // namespace

FleetPresence::FleetPresence(PresenceSettings settings, ReportFn report, FleetStats* stats,
                             LayoutFn layout)
    : settings_(std::move(settings)),
      report_(std::move(report)),
      layout_(std::move(layout)),
      stats_(stats) {}

FleetPresence::~FleetPresence() { Stop(); }

void FleetPresence::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Run(); });
}

void FleetPresence::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void FleetPresence::Run() {
  Heartbeat heartbeat(settings_, stats_);
  const auto period = std::max(settings_.heartbeat_ttl / 3, std::chrono::milliseconds(1));
  // Since when every heartbeat found every live agent marking read holds (if all_marking).
  bool all_marking = false;
  auto all_mark_since = std::chrono::steady_clock::now();
  bool native = false;
  // Not marking: since when every heartbeat has listed this agent (unmarked) on a quorum.
  bool listed = false;
  auto listed_since = std::chrono::steady_clock::now();
  // A verdict lasts a heartbeat ttl from its start; an agent that does not mark waits that, a
  // period more, and a node timeout (Layout::mark_readers).
  const auto grace = settings_.heartbeat_ttl + period + settings_.node_timeout;
  while (true) {
    const std::optional<HolderReport> report = report_ ? report_() : std::nullopt;
    // The masters are read from here on: a verdict is as old as this.
    const auto started = std::chrono::steady_clock::now();
    bool all_mark = false, registered = false;
    const std::optional<bool> reporter = heartbeat.Beat(report, &all_mark, &registered);
    const auto now = std::chrono::steady_clock::now();
    if (registered && !listed) listed_since = now;
    listed = registered;
    if (all_mark && !all_marking) all_mark_since = now;
    all_marking = all_mark;
    const bool was = native;
    native = all_marking && now - all_mark_since >=
                                std::chrono::milliseconds(settings_.record.settings.max_ttl_ms);
    if (native != was) {
      spdlog::info("fleet: plain locks {}", native
                       ? "now go to the masters as SET NX (every agent has marked read holds for "
                         "max_ttl_ms)"
                       : "go to the masters as the claim script again (an agent that does not "
                         "mark read holds is in the fleet, or too few masters answered)");
    }
    if (layout_) {
      Layout layout;
      layout.native_claims = native;
      layout.native_until = started + settings_.heartbeat_ttl;
      layout.mark_readers = settings_.marks_readers || !listed || now - listed_since < grace;
      layout_(layout);
    }
    if (reporter) {
      heartbeats_.fetch_add(1);
      if (*reporter != reporter_.exchange(*reporter)) {
        spdlog::info("fleet: this agent {} the reporter of fleet totals",
                     *reporter ? "is now" : "is no longer");
      }
    } else if (reporter_.exchange(false)) {
      spdlog::info("fleet: this agent is no longer the reporter of fleet totals");
    }
    if (stats_) stats_->own.reporter.Set(reporter_.load() ? 1 : 0);
    std::unique_lock lock(mu_);
    if (wake_.wait_for(lock, period, [this] { return stopping_; })) break;
  }
  reporter_.store(false);
  if (stats_) stats_->own.reporter.Set(0);
  heartbeat.Deregister();
}

}  // namespace lw::fleet
