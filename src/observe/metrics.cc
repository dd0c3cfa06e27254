#include "observe/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <map>

#include "core/error_code.h"

namespace lw {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

double Seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

const Histogram::BucketBoundaries kMasterBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                    0.005,  0.01,    0.025,  0.05,  0.1,
                                                    0.25,   0.5,     1};

constexpr std::array<const char*, static_cast<size_t>(NodeCommand::kCount)> kCommands = {
    "set_nx", "delete_if_held", "extend_if_held", "ping", "set_nx_read_fence", "raise_fence"};
constexpr std::array<const char*, static_cast<size_t>(NodeError::kCount)> kNodeErrors = {
    "error_reply", "unavailable", "disconnected", "connect_failed", "stalled", "timeout"};

template <class Builder>
auto& Register(Builder builder, const char* name, const char* help,
               prometheus::Registry& registry) {
  return builder.Name(name).Help(help).Register(registry);
}

}  // namespace

// One master's children, resolved once.
struct MasterChildren {
  Gauge* up = nullptr;
  Gauge* quarantined = nullptr;
  std::array<Histogram*, kCommands.size()> latency{};
  std::array<Counter*, kNodeErrors.size()> errors{};
  Counter* reconnects = nullptr;
  // Scanner (null when the scanner is off).
  std::array<Gauge*, 3> leaked{};  // no_ttl, ttl_above_max, partial
  Counter* scanned = nullptr;
  Gauge* scan_duration = nullptr;
  Gauge* scan_last_success = nullptr;
  Counter* scan_errors = nullptr;
};

class NodeMetrics final : public NodeObserver {
 public:
  explicit NodeMetrics(MasterChildren* m) : m_(m) {}
  void CommandDone(NodeCommand command, std::chrono::nanoseconds latency) override {
    m_->latency[static_cast<size_t>(command)]->Observe(Seconds(latency));
  }
  void Error(NodeError kind) override { m_->errors[static_cast<size_t>(kind)]->Increment(); }
  void Up(bool up) override { m_->up->Set(up ? 1 : 0); }
  void Reconnected() override { m_->reconnects->Increment(); }
  void Quarantined(bool quarantined, const std::string& /*reason*/,
                   std::chrono::milliseconds /*left*/) override {
    m_->quarantined->Set(quarantined ? 1 : 0);
  }

 private:
  MasterChildren* m_;
};

struct Metrics::Impl final : ScanObserver {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();

  Gauge *locks_held = nullptr, *sessions = nullptr, *waiters = nullptr, *masters = nullptr,
        *masters_up = nullptr, *quorum = nullptr, *margin = nullptr;
  std::vector<MasterChildren> per_master;
  std::vector<std::unique_ptr<NodeMetrics>> node_observers;

  // ScanObserver
  void KeysScanned(size_t master, uint64_t keys) override {
    if (master < per_master.size() && per_master[master].scanned) {
      per_master[master].scanned->Increment(static_cast<double>(keys));
    }
  }
  void PassDone(size_t master, double seconds, double finished_unix_s,
                const FindingCounts& counts) override {
    if (master >= per_master.size() || per_master[master].scanned == nullptr) return;
    MasterChildren& m = per_master[master];
    m.leaked[0]->Set(static_cast<double>(counts.no_ttl));
    m.leaked[1]->Set(static_cast<double>(counts.ttl_above_max));
    m.leaked[2]->Set(static_cast<double>(counts.partial));
    m.scan_duration->Set(seconds);
    m.scan_last_success->Set(finished_unix_s);
  }
  void PassFailed(size_t master) override {
    if (master < per_master.size() && per_master[master].scan_errors) {
      per_master[master].scan_errors->Increment();
    }
  }
};

Metrics::Metrics(const std::vector<std::string>& master_addrs, const BuildInfo& build,
                 double scan_interval_s)
    : impl_(std::make_unique<Impl>()) {
  auto& r = *impl_->registry;
  Impl& m = *impl_;


  auto gauge = [&](const char* name, const char* help) {
    return &Register(prometheus::BuildGauge(), name, help, r).Add({});
  };
  m.locks_held = gauge("lockwarden_locks_held", "Locks currently granted through this agent.");
  m.sessions = gauge("lockwarden_sessions", "Client connections open on the socket.");
  m.waiters = gauge("lockwarden_waiters", "Acquire requests queued across all resources.");
  m.masters = gauge("lockwarden_masters", "Masters configured.");
  m.masters_up = gauge("lockwarden_masters_up", "Masters connected and answering.");
  m.quorum = gauge("lockwarden_quorum_size", "Votes a lock needs: masters/2 + 1.");
  m.margin = gauge("lockwarden_quorum_margin",
                   "Usable masters (up, not in restart quarantine) - quorum_size; below 0 no lock "
                   "can be granted.");
  m.masters->Set(static_cast<double>(master_addrs.size()));
  m.quorum->Set(static_cast<double>(master_addrs.size() / 2 + 1));
  m.margin->Set(-static_cast<double>(master_addrs.size() / 2 + 1));

  auto& up = Register(prometheus::BuildGauge(), "lockwarden_master_up",
                      "1 while the connection to the master is up and handshaken.", r);
  auto& quarantined = Register(prometheus::BuildGauge(), "lockwarden_master_quarantined",
                               "1 while the master is in restart quarantine: it started less "
                               "than max_ttl ago, so its votes do not count toward quorum.", r);
  auto& latency = Register(prometheus::BuildHistogram(),
                           "lockwarden_master_request_duration_seconds",
                           "Round trip of commands sent to a master, by command.", r);
  auto& errors = Register(prometheus::BuildCounter(), "lockwarden_master_errors_total",
                          "Master errors by kind.", r);
  auto& reconnects = Register(prometheus::BuildCounter(), "lockwarden_master_reconnects_total",
                              "Successful connections to a master after the first.", r);
  const bool scanner = scan_interval_s > 0;
  Family<Gauge>* leaked = nullptr;
  Family<Counter>* scanned = nullptr;
  Family<Gauge>* duration = nullptr;
  Family<Gauge>* last_success = nullptr;
  Family<Counter>* scan_errors = nullptr;
  if (scanner) {
    leaked = &Register(prometheus::BuildGauge(), "lockwarden_scan_leaked_keys",
                       "Keys found by the last completed scan, by master and finding.", r);
    scanned = &Register(prometheus::BuildCounter(), "lockwarden_scan_keys_scanned_total",
                        "Keys returned by SCAN.", r);
    duration = &Register(prometheus::BuildGauge(), "lockwarden_scan_duration_seconds",
                         "Duration of the last completed scan pass.", r);
    last_success = &Register(prometheus::BuildGauge(),
                             "lockwarden_scan_last_success_timestamp_seconds",
                             "Unix time the last scan pass over the master completed.", r);
    scan_errors = &Register(prometheus::BuildCounter(), "lockwarden_scan_errors_total",
                            "Scan passes over the master that failed.", r);
    gauge("lockwarden_scan_interval_seconds", "Configured pause between scan passes.")
        ->Set(scan_interval_s);
  }
  m.per_master.resize(master_addrs.size());
  for (size_t i = 0; i < master_addrs.size(); ++i) {
    MasterChildren& c = m.per_master[i];
    const prometheus::Labels master{{"master", master_addrs[i]}};
    c.up = &up.Add(master);
    c.quarantined = &quarantined.Add(master);
    for (size_t k = 0; k < kCommands.size(); ++k) {
      c.latency[k] = &latency.Add({{"master", master_addrs[i]}, {"command", kCommands[k]}},
                                  kMasterBuckets);
    }
    for (size_t k = 0; k < kNodeErrors.size(); ++k) {
      c.errors[k] = &errors.Add({{"master", master_addrs[i]}, {"kind", kNodeErrors[k]}});
    }
    c.reconnects = &reconnects.Add(master);
    if (scanner) {
      const char* findings[] = {"no_ttl", "ttl_above_max", "partial"};
      for (size_t k = 0; k < 3; ++k) {
        c.leaked[k] = &leaked->Add({{"master", master_addrs[i]}, {"finding", findings[k]}});
      }
      c.scanned = &scanned->Add(master);
      c.scan_duration = &duration->Add(master);
      c.scan_last_success = &last_success->Add(master);
      c.scan_errors = &scan_errors->Add(master);
    }
    m.node_observers.push_back(std::make_unique<NodeMetrics>(&c));
  }

  Register(prometheus::BuildGauge(), "lockwarden_build_info",
           "Version and commit of the running agent; always 1.", r)
      .Add({{"version", build.version}, {"commit", build.commit}})
      .Set(1);
  gauge("lockwarden_start_time_seconds", "Unix time the agent started.")
      ->Set(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count());
}

Metrics::~Metrics() = default;

NodeObserver& Metrics::node(size_t index) { return *impl_->node_observers.at(index); }
ScanObserver& Metrics::scan() { return *impl_; }

void Metrics::SetState(const StateSample& s) {
  impl_->locks_held->Set(static_cast<double>(s.locks_held));
  impl_->sessions->Set(static_cast<double>(s.sessions));
  impl_->waiters->Set(static_cast<double>(s.waiters));
  impl_->masters->Set(s.masters);
  impl_->masters_up->Set(s.masters_up);
  impl_->quorum->Set(s.quorum);
  impl_->margin->Set(s.masters_usable - s.quorum);
}

stats::Registry& Metrics::registry() { return *impl_->registry; }

std::string Metrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

}  // namespace lw
