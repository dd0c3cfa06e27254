#include "fleet/presence.h"

#include <spdlog/spdlog.h>

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
  // quorum, or nullopt when no master took the heartbeat.
  std::optional<bool> Beat(const std::optional<HolderReport>& report) {
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
    for (size_t i = 0; i < links_.size(); ++i) {
      if (BeatOn(i, entry, now)) ++reached;
      reporter += holds_reporter_[i] ? 1 : 0;
    }
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

  bool BeatOn(size_t i, const std::string& entry, int64_t now) {
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
    return true;
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

FleetPresence::FleetPresence(PresenceSettings settings, ReportFn report, FleetStats* stats)
    : settings_(std::move(settings)), report_(std::move(report)), stats_(stats) {}

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
  while (true) {
    const std::optional<HolderReport> report = report_ ? report_() : std::nullopt;
    const std::optional<bool> reporter = heartbeat.Beat(report);
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
