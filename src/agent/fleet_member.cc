#include "agent/fleet_member.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <climits>
#include <unordered_set>

#include "agent/agent_id.h"
#include "agent/options_from_config.h"
#include "core/quote.h"
#include "core/unix_time.h"

namespace lw {
namespace {

constexpr size_t kMaxShownBy = 200;  // of an order's `by`, in logs and events

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

fleet::AgentRecord RecordOf(const Config& cfg, int64_t started_unix_ms) {
  fleet::AgentRecord r;
  r.id = LoadAgentId(cfg.socket_path);
  r.host = HostName();
  r.name = cfg.agent_name.empty() ? r.host : cfg.agent_name;
  r.pid = static_cast<int>(getpid());
  r.version = LOCKWARDEN_VERSION;
  r.started_unix_ms = started_unix_ms;
  r.heartbeat_ttl_ms = cfg.heartbeat_ttl_ms;
  r.settings = fleet::SafetySettingsFrom(cfg);
  return r;
}

std::string CmdlineOf(const Peer& peer, bool share) {
  return share ? std::string(ShortenUtf8(peer.cmdline, fleet::kMaxCmdlineBytes)) : "";
}

}  // namespace

FleetMember::FleetMember(const Config& cfg, Metrics& metrics, int64_t started_unix_ms)
    : cfg_(cfg), record_(RecordOf(cfg, started_unix_ms)) {
  if (cfg.heartbeat_ttl_ms <= 0) return;
  stats_ = std::make_unique<fleet::FleetStats>(metrics.registry());
  reader_ = std::make_unique<fleet::FleetReader>(fleet::ReaderSettingsFrom(cfg), stats_.get());
  // Registered before the admin server serves /metrics; the presence exists from Start on.
  metrics.AddConditional(stats_->totals_registry, [this] {
    const fleet::FleetPresence* presence = running_.load();
    return presence != nullptr && presence->reporter();
  });
}

FleetMember::~FleetMember() {
  Stop();
  running_.store(nullptr);
}

void FleetMember::Start(std::string admin_url, fleet::FleetPresence::ReportFn report,
                        fleet::FleetPresence::LayoutFn layout) {
  record_.admin_url = std::move(admin_url);
  if (!enabled() || presence_) return;
  fleet::PresenceSettings ps = fleet::PresenceSettingsFrom(cfg_);
  ps.record = record_;
  ps.marks_readers = cfg_.mark_readers;
  // Each heartbeat asks the loop for the report; the reporter also keeps the reader fresh (it
  // exports the fleet totals), the others read only when asked.
  presence_ = std::make_unique<fleet::FleetPresence>(
      std::move(ps),
      [this, report = std::move(report)]() -> std::optional<fleet::HolderReport> {
        reader_->KeepFresh(running_.load()->reporter());
        return report();
      },
      stats_.get(), std::move(layout));
  running_.store(presence_.get());
  reader_->Start();
  presence_->Start();
  spdlog::info("in the fleet as {} (agent {}), heartbeat every {} ms; revoke orders on {}",
               QuoteClientText(record_.name), record_.id, cfg_.heartbeat_ttl_ms / 3,
               revoke_channel());
}

void FleetMember::Stop() {
  if (presence_) presence_->Stop();  // deregisters first: the registry loses us at once
  if (reader_) reader_->Stop();
}

FleetMember::RevokeFn FleetMember::Revoker() const {
  if (!enabled()) return nullptr;
  return [masters = cfg_.masters, key_prefix = cfg_.key_prefix,
          connect_timeout = cfg_.connect_timeout_ms](fleet::RevokeRequest request) {
    request.masters = masters;
    request.key_prefix = key_prefix;
    request.connect_timeout = std::chrono::milliseconds(connect_timeout);
    return fleet::RevokeInFleet(request);
  };
}

void FleetMember::Obey(const std::string& message, LockEngine& engine, const LockService& service,
                       EventLog& events) {
  auto order = fleet::DecodeRevokeOrder(message);
  if (!order) {
    if (!warned_malformed_) {
      spdlog::warn("ignoring a malformed revoke order on {} ({} bytes); later ones are ignored "
                   "without a warning",
                   revoke_channel(), message.size());
      warned_malformed_ = true;
    }
    return;
  }
  const std::string by = QuoteClientText(order->by, kMaxShownBy);
  const std::string key = QuoteClientText(order->key);
  const int masters = static_cast<int>(cfg_.masters.size());
  engine.RevokeGrant(order->key, order->value,
                     [&service, &events, by, key, masters](
                         const std::optional<LockEngine::Revocation>& r) {
                       if (!r) return;  // another master's copy of an order already obeyed
                       const Peer peer = service.PeerOf(r->session);
                       const std::string what =
                           "lock key " + key + " revoked through the fleet by " + by +
                           " (holder session " + std::to_string(r->session) + " pid " +
                           std::to_string(peer.pid) + "; key deleted on " +
                           std::to_string(r->deleted) + " of " + std::to_string(masters) +
                           " masters)";
                       spdlog::warn("{}", what);
                       events.Add({UnixMsNow(), "admin", Severity::kWarning, what, 1});
                     });
}

std::vector<int> ActorPids(const std::vector<const Peer*>& peers) {
  std::unordered_set<int> in_report;
  for (const Peer* p : peers) {
    if (p->pid > 0) in_report.insert(p->pid);
  }
  std::vector<int> out;
  out.reserve(peers.size());
  for (const Peer* p : peers) {
    int actor = p->pid;
    for (int a : p->ancestors) {
      if (in_report.contains(a)) actor = a;  // the last found is the outermost
    }
    out.push_back(actor);
  }
  return out;
}

fleet::HolderReport HolderReportOf(const LockService& service, const LockEngine& engine,
                                   bool share_cmdline, int64_t now_unix_ms) {
  fleet::HolderReport report;
  report.unix_ms = now_unix_ms;
  report.locks_total = engine.locks_held();
  report.waiters_total = engine.waiters();
  const std::vector<LockView> locks = service.ListedLocks(fleet::kMaxPublishedLocks);
  const std::vector<WaiterView> waiters = service.Waiters(fleet::kMaxPublishedWaiters);
  std::vector<const Peer*> peers;  // the locks' holders, then the waiters
  for (const LockView& l : locks) {
    Hold& h = report.locks.emplace_back(l);
    h.holder.cmdline = CmdlineOf(l.holder, share_cmdline);
    peers.push_back(&l.holder);
  }
  for (const WaiterView& w : waiters) {
    fleet::WaiterDetail d;
    d.resource = w.resource;
    d.pid = w.peer.pid;
    d.uid = w.peer.uid;
    d.cmdline = CmdlineOf(w.peer, share_cmdline);
    d.since_unix_ms = now_unix_ms - w.waited_ms;
    d.mode = w.mode;
    d.permits = w.mode == HoldMode::kPermit ? w.permits : 0;
    report.waiters.push_back(std::move(d));
    peers.push_back(&w.peer);
  }
  const std::vector<int> actors = ActorPids(peers);
  for (size_t i = 0; i < actors.size(); ++i) {
    if (i < report.locks.size()) {
      report.locks[i].holder.actor_pid = actors[i];
    } else {
      report.waiters[i - report.locks.size()].actor_pid = actors[i];
    }
  }
  return report;
}

std::string AdminUrlOf(const std::string& setting, const std::string& listen_host, int port) {
  if (!setting.empty()) return setting;
  if (port == 0) return "";
  std::string host = listen_host;
  if (host == "0.0.0.0" || host == "::" || host.empty()) host = HostName();
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(port);
}

}  // namespace lw
