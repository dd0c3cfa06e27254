#include "scan/presence_probe.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <optional>
#include <unordered_set>

#include "core/key_parts.h"
#include "core/unix_time.h"
#include "redis/blocking_connection.h"

namespace lw {
namespace {

using SteadyClock = std::chrono::steady_clock;

}  // namespace

std::string_view PresenceName(KeyPresence p) {
  switch (p) {
    case KeyPresence::kHeld:
      return "held";
    case KeyPresence::kMissing:
      return "missing";
    case KeyPresence::kOther:
      return "other";
    case KeyPresence::kUnknown:
      break;
  }
  return "unknown";
}

namespace {

KeyPresence Classify(const KeyPartRow& row, const Reply& reply, const std::string& token) {
  switch (reply.kind) {
    case Reply::Kind::kString:
      return CheckAnswerHolds(row, reply.text, token) ? KeyPresence::kHeld : KeyPresence::kOther;
    case Reply::Kind::kNil:
      return KeyPresence::kMissing;
    default:
      return KeyPresence::kUnknown;
  }
}

}  // namespace

KeyPresence ClassifyPresence(const Reply& reply, const std::string& token) {
  return Classify(RowOf(KeyPart::Part::kBase), reply, token);
}

Command PresenceCommand(const std::string& key, const std::string& token) {
  return CheckCommand(RowToRead("", key), key, token);
}

KeyPresence ClassifyPresenceOf(const std::string& key, const Reply& reply,
                               const std::string& token) {
  return Classify(RowToRead("", key), reply, token);
}

GrantList GrantsForRound(const GrantList& grants, size_t max, bool* capped) {
  GrantList out;
  std::unordered_set<std::string_view> seen;
  *capped = false;
  for (const auto& grant : grants) {
    if (seen.contains(grant.first)) continue;
    if (out.size() == max) {
      *capped = true;
      break;
    }
    seen.insert(grant.first);
    out.push_back(grant);
  }
  return out;
}

// ---- PresenceProbe ----------------------------------------------------------------------------

struct PresenceProbe::Master {
  const MasterAddress* address = nullptr;
  std::unique_ptr<BlockingConnection> conn;  // null: not open (never opened, or dropped after an error)
  // Start of the round that last tried to open a connection; a failing master is tried again
  // only in a round starting kRetryPause later (a healthy one is opened whenever needed). Round
  // starts are used rather than attempt times so that, with the default one-second period, a dead
  // master is retried every round.
  std::optional<SteadyClock::time_point> last_open_round;
  bool failing = false;  // to log transitions only, not every round
};

PresenceProbe::PresenceProbe(std::vector<MasterAddress> masters, std::function<GrantList()> grants,
                             std::chrono::milliseconds period,
                             std::chrono::milliseconds demand_window)
    : addresses_(std::move(masters)),
      grants_(std::move(grants)),
      period_(period),
      demand_window_(demand_window) {}

PresenceProbe::~PresenceProbe() { Stop(); }

void PresenceProbe::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void PresenceProbe::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PresenceProbe::Demand() {
  bool was_idle;
  {
    std::lock_guard lock(mu_);
    const auto now = SteadyClock::now();
    was_idle = now >= demand_until_;
    demand_until_ = now + demand_window_;
  }
  // Only the first call of a demand window needs the thread; later ones just move the deadline.
  if (was_idle) wake_.notify_all();
}

std::shared_ptr<const PresenceReport> PresenceProbe::Latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

bool PresenceProbe::stopping() const {
  std::lock_guard lock(mu_);
  return stop_;
}

void PresenceProbe::Loop() {
  // hiredis writes with write(): a master that died between two writes of one pipeline would
  // raise SIGPIPE. Blocked on this thread, it stays pending and write() fails with EPIPE, so the
  // probe is safe in a process that did not ignore SIGPIPE (tests, the one-shot CLI).
  sigset_t sigpipe;
  sigemptyset(&sigpipe);
  sigaddset(&sigpipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &sigpipe, nullptr);
  std::vector<Master> masters(addresses_.size());
  for (size_t m = 0; m < masters.size(); ++m) masters[m].address = &addresses_[m];
  SteadyClock::time_point next_round{};
  while (WaitForRound(next_round, masters)) {
    const auto started = SteadyClock::now();
    auto report = std::make_shared<const PresenceReport>(Round(masters, started));
    if (stopping()) return;  // the round may have been cut short: not a report
    {
      std::lock_guard lock(mu_);
      latest_ = std::move(report);
    }
    rounds_.fetch_add(1);  // after the swap: rounds() >= n means Latest() is round n or newer
    next_round = started + period_;
  }
}

bool PresenceProbe::WaitForRound(SteadyClock::time_point& next_round,
                                 std::vector<Master>& masters) {
  std::unique_lock lock(mu_);
  while (!stop_) {
    const auto now = SteadyClock::now();
    if (now >= demand_until_) {
      // Nobody looking. Close the connections (outside the lock) rather than keep them idle
      // for hours, where a server timeout or a firewall would silently drop them and the
      // next look would start with a round of unknowns. Then sleep until Demand() or Stop()
      // (both notify): no timer, no traffic.
      if (std::any_of(masters.begin(), masters.end(),
                      [](const Master& m) { return m.conn != nullptr; })) {
        lock.unlock();
        for (Master& master : masters) master.conn.reset();
        lock.lock();
        continue;  // Demand() or Stop() may have come meanwhile
      }
      idle_.store(true);
      wake_.wait(lock);
      idle_.store(false);
      next_round = SteadyClock::time_point{};  // the first Demand() of a window probes at once
      continue;
    }
    if (now >= next_round) return true;
    wake_.wait_until(lock, next_round);
  }
  return false;
}

PresenceReport PresenceProbe::Round(std::vector<Master>& masters, SteadyClock::time_point started) {
  bool capped = false;
  const GrantList grants =
      GrantsForRound(grants_ ? grants_() : GrantList{}, kMaxGrantsPerRound, &capped);
  if (capped && !cap_logged_) {
    cap_logged_ = true;
    spdlog::warn("presence probe: more than {} grants held; checking the first {} each round",
                 kMaxGrantsPerRound, kMaxGrantsPerRound);
  }
  PresenceReport report;
  for (const auto& [key, token] : grants) {
    report.keys[key].assign(masters.size(), KeyPresence::kUnknown);
  }
  // No grants, no traffic: connections stay as they are.
  for (size_t m = 0; m < masters.size() && !grants.empty(); ++m) {
    if (stopping()) break;
    ProbeMaster(masters[m], m, started, grants, report);
  }
  report.checked_unix_ms = UnixMsNow();
  return report;
}

void PresenceProbe::ProbeMaster(Master& master, size_t m, SteadyClock::time_point round_started,
                                const GrantList& grants, PresenceReport& report) {
  auto fail = [&](const std::string& error) {
    master.conn.reset();
    if (!master.failing) {
      spdlog::warn("presence probe: {} unreachable, its column shows unknown: {}",
                   master.address->Display(), error);
    }
    master.failing = true;
  };
  if (!master.conn) {
    if (master.failing && master.last_open_round &&
        round_started - *master.last_open_round < kRetryPause) {
      return;  // still unknown: retried once the pause is over
    }
    master.last_open_round = round_started;
    auto opened = BlockingConnection::Open(*master.address, kConnectTimeout, kCommandTimeout);
    if (auto* error = std::get_if<std::string>(&opened)) return fail(*error);
    master.conn = std::move(std::get<std::unique_ptr<BlockingConnection>>(opened));
  }
  std::vector<Command> commands;
  commands.reserve(grants.size());
  for (const auto& grant : grants) commands.push_back(PresenceCommand(grant.first, grant.second));
  auto replies = master.conn->Pipeline(commands);
  if (auto* error = std::get_if<std::string>(&replies)) return fail("GET: " + *error);
  const auto& rs = std::get<std::vector<Reply>>(replies);
  for (size_t i = 0; i < grants.size() && i < rs.size(); ++i) {
    report.keys[grants[i].first][m] = ClassifyPresenceOf(grants[i].first, rs[i], grants[i].second);
  }
  if (master.failing) spdlog::info("presence probe: {} answers again", master.address->Display());
  master.failing = false;
}

}  // namespace lw
