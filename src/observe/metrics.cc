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

const Histogram::BucketBoundaries kWaitBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                  0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                                  1,      2.5,     5,      10,    30};
const Histogram::BucketBoundaries kAttemptBuckets = {0, 1, 2, 3, 5, 10, 20, 50, 100};
const Histogram::BucketBoundaries kHoldBuckets = {0.001, 0.01, 0.1, 0.5, 1,   5,   10,
                                                  30,    60,   300, 900, 1800, 3600};

constexpr std::array<const char*, static_cast<size_t>(AcquireOutcome::kCount)> kOutcomes = {
    "acquired", "timeout", "no_quorum", "error"};
constexpr std::array<const char*, static_cast<size_t>(RenewOutcome::kCount)> kRenewOutcomes = {
    "extended", "retry", "lost"};
constexpr std::array<const char*, static_cast<size_t>(FenceOutcome::kCount)> kFenceOutcomes = {
    "written", "not_confirmed", "counter_ahead"};

template <class Builder>
auto& Register(Builder builder, const char* name, const char* help,
               prometheus::Registry& registry) {
  return builder.Name(name).Help(help).Register(registry);
}

}  // namespace

struct Metrics::Impl final : EngineObserver, RequestObserver {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();

  std::array<Histogram*, kOutcomes.size()> acquire_wait{};
  Histogram* attempts = nullptr;
  Histogram* hold = nullptr;
  Family<Counter>* requests_family = nullptr;
  Family<Counter>* failures_family = nullptr;
  Counter* lost_failures = nullptr;
  std::array<Counter*, kRenewOutcomes.size()> renewals{};
  std::array<Counter*, kFenceOutcomes.size()> fence_rounds{};
  Family<Counter>* lost_family = nullptr;
  Gauge *locks_held = nullptr, *sessions = nullptr, *waiters = nullptr, *masters = nullptr,
        *masters_up = nullptr, *quorum = nullptr, *margin = nullptr;
  Family<Counter>* admin_actions = nullptr;
  std::array<Counter*, kAdminRefusalReasons.size()> admin_refusals{};
  Counter* release_wakeups = nullptr;
  Counter* local_handoffs = nullptr;
  // By master index: lockwarden_master_errors_total{kind="timeout"}, the engine's count on the
  // family the master connections declare (redis/node_stats.h).
  std::vector<std::unique_ptr<stats::Counter>> master_timeouts;

  // EngineObserver
  void AcquireFinished(AcquireOutcome outcome, std::chrono::nanoseconds waited,
                       int tries) override {
    acquire_wait[static_cast<size_t>(outcome)]->Observe(Seconds(waited));
    attempts->Observe(tries);
  }
  void HoldEnded(std::chrono::nanoseconds held) override { hold->Observe(Seconds(held)); }
  void Renewed(RenewOutcome outcome) override {
    renewals[static_cast<size_t>(outcome)]->Increment();
  }
  void LocalHandOff() override { local_handoffs->Increment(); }
  void FenceRound(FenceOutcome outcome) override {
    fence_rounds[static_cast<size_t>(outcome)]->Increment();
  }
  void LockLost(std::string_view reason) override {
    lost_family->Add({{"reason", std::string(reason)}}).Increment();
    lost_failures->Increment();
  }
  void MasterMissedDeadline(size_t index) override {
    if (index < master_timeouts.size()) master_timeouts[index]->Inc();
  }

  // RequestObserver. Called for every request, on the loop thread only: the children are
  // cached here so the hot path neither builds a label map nor takes the family's mutex.
  void Received(std::string_view op) override {
    auto it = request_children.find(op);
    if (it == request_children.end()) {
      Counter* c = &requests_family->Add({{"op", std::string(op)}});
      it = request_children.emplace(std::string(op), c).first;
    }
    it->second->Increment();
  }
  void Failed(std::string_view op, ErrorCode code) override {
    const auto key = std::make_pair(std::string(op), code);
    auto it = failure_children.find(key);
    if (it == failure_children.end()) {
      Counter* c = &failures_family->Add(
          {{"op", std::string(op)}, {"reason", std::string(ErrorCodeName(code))}});
      it = failure_children.emplace(key, c).first;
    }
    it->second->Increment();
  }
  void LimitReached(std::string_view limit) override {
    for (size_t i = 0; i < std::size(kLimitNames); ++i) {
      if (kLimitNames[i] == limit) limit_refusals[i]->Increment();
    }
  }
  void AccessDenied() override { access_denied->Increment(); }
  void Backpressure(bool paused) override {
    if (paused) {
      sessions_paused->Increment();
    } else {
      sessions_paused->Decrement();
    }
  }
  std::array<Counter*, std::size(kLimitNames)> limit_refusals{};
  Counter* access_denied = nullptr;
  Gauge* sessions_paused = nullptr;
  std::map<std::string, Counter*, std::less<>> request_children;
  std::map<std::pair<std::string, ErrorCode>, Counter*> failure_children;
};

Metrics::Metrics(const std::vector<std::string>& master_addrs, const BuildInfo& build)
    : impl_(std::make_unique<Impl>()) {
  auto& r = *impl_->registry;
  Impl& m = *impl_;

  auto& wait = Register(prometheus::BuildHistogram(), "lockwarden_acquire_wait_seconds",
                        "Time from an acquire request to its reply, by outcome.", r);
  for (size_t i = 0; i < kOutcomes.size(); ++i) {
    m.acquire_wait[i] = &wait.Add({{"outcome", kOutcomes[i]}}, kWaitBuckets);
  }
  m.attempts = &Register(prometheus::BuildHistogram(), "lockwarden_acquire_attempts",
                         "Redlock rounds one acquire request needed.", r)
                    .Add({}, kAttemptBuckets);
  m.hold = &Register(prometheus::BuildHistogram(), "lockwarden_lock_hold_seconds",
                     "How long granted locks were held (grant to release, loss or close).", r)
                .Add({}, kHoldBuckets);
  m.requests_family = &Register(prometheus::BuildCounter(), "lockwarden_requests_total",
                                "Requests received on the socket, by op.", r);
  m.failures_family = &Register(prometheus::BuildCounter(), "lockwarden_failures_total",
                                "Failed requests by op and error code; op=lock reason=lost "
                                "counts lost locks.", r);
  m.lost_failures = &m.failures_family->Add({{"op", "lock"}, {"reason", "lost"}});
  auto& renewals = Register(prometheus::BuildCounter(), "lockwarden_renewals_total",
                            "Automatic renewals by outcome.", r);
  for (size_t i = 0; i < kRenewOutcomes.size(); ++i) {
    m.renewals[i] = &renewals.Add({{"outcome", kRenewOutcomes[i]}});
  }
  m.local_handoffs =
      &Register(prometheus::BuildCounter(), "lockwarden_local_handoffs_total",
                "Releases that handed the lock to the next local waiter without a round trip "
                "to the masters (the key stays set; docs/safety.md).", r)
           .Add({});
  auto& fences = Register(prometheus::BuildCounter(), "lockwarden_fence_rounds_total",
                          "Fence writes (phase 2 of a fenced acquire) by outcome; "
                          "counter_ahead should stay 0 (docs/safety.md).", r);
  for (size_t i = 0; i < kFenceOutcomes.size(); ++i) {
    m.fence_rounds[i] = &fences.Add({{"outcome", kFenceOutcomes[i]}});
  }
  m.lost_family = &Register(prometheus::BuildCounter(), "lockwarden_locks_lost_total",
                            "Locks taken away from their holder, by reason.", r);
  for (const char* reason : {"renew_failed", "expired", "revoked"}) {
    m.lost_family->Add({{"reason", reason}});
  }
  m.release_wakeups = &Register(prometheus::BuildCounter(), "lockwarden_release_wakeups_total",
                                "Waiters woken early by a release announced by another agent.", r)
                           .Add({});
  for (const char* op : {"acquire", "release", "extend"}) m.requests_family->Add({{"op", op}});
  auto& limits = Register(prometheus::BuildCounter(), "lockwarden_limit_refusals_total",
                          "Requests or connections a client limit refused, by limit.", r);
  for (size_t i = 0; i < std::size(kLimitNames); ++i) {
    m.limit_refusals[i] = &limits.Add({{"limit", std::string(kLimitNames[i])}});
  }
  m.access_denied = &Register(prometheus::BuildCounter(), "lockwarden_access_denied_total",
                              "Acquires refused because no access rule allows the peer.", r)
                         .Add({});
  m.sessions_paused = &Register(prometheus::BuildGauge(), "lockwarden_sessions_paused",
                                "Sessions not read from until their unsent replies drain.", r)
                           .Add({});

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

  for (const std::string& addr : master_addrs) {
    m.master_timeouts.push_back(std::make_unique<stats::Counter>(
        r, "lockwarden_master_errors_total", "Master errors by kind.",
        stats::Labels{{"master", addr}, {"kind", "timeout"}}));
  }

  Register(prometheus::BuildGauge(), "lockwarden_build_info",
           "Version and commit of the running agent; always 1.", r)
      .Add({{"version", build.version}, {"commit", build.commit}})
      .Set(1);
  gauge("lockwarden_start_time_seconds", "Unix time the agent started.")
      ->Set(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count());
  m.admin_actions = &Register(prometheus::BuildCounter(), "lockwarden_admin_actions_total",
                              "Operator actions on the admin API, by action and result.", r);
  // Known series start at 0, so rate() and alerts see the first action.
  for (const char* action : {"expire_key", "delete_key", "rescan", "force_release"}) {
    for (const char* result : {"done", "refused", "stale", "error"}) {
      m.admin_actions->Add({{"action", action}, {"result", result}});
    }
  }
  auto& refusals = Register(prometheus::BuildCounter(), "lockwarden_admin_refusals_total",
                            "Requests and connections the admin HTTP server refused, by reason.",
                            r);
  for (size_t i = 0; i < kAdminRefusalReasons.size(); ++i) {
    m.admin_refusals[i] = &refusals.Add({{"reason", std::string(kAdminRefusalReasons[i])}});
  }
}

Metrics::~Metrics() = default;

EngineObserver& Metrics::engine() { return *impl_; }
RequestObserver& Metrics::requests() { return *impl_; }
stats::Registry& Metrics::registry() { return *impl_->registry; }

void Metrics::SetState(const StateSample& s) {
  impl_->locks_held->Set(static_cast<double>(s.locks_held));
  impl_->sessions->Set(static_cast<double>(s.sessions));
  impl_->waiters->Set(static_cast<double>(s.waiters));
  impl_->masters->Set(s.masters);
  impl_->masters_up->Set(s.masters_up);
  impl_->quorum->Set(s.quorum);
  impl_->margin->Set(s.masters_usable - s.quorum);
}

void Metrics::CountAdminAction(const std::string& action, const std::string& result) {
  impl_->admin_actions->Add({{"action", action}, {"result", result}}).Increment();
}

void Metrics::CountAdminRefusal(std::string_view reason) {
  for (size_t i = 0; i < kAdminRefusalReasons.size(); ++i) {
    if (kAdminRefusalReasons[i] == reason) return impl_->admin_refusals[i]->Increment();
  }
}

void Metrics::CountReleaseWakeup() { impl_->release_wakeups->Increment(); }

std::string Metrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

}  // namespace lw
