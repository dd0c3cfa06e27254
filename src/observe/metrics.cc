#include "observe/metrics.h"

#include <prometheus/text_serializer.h>

#include <chrono>
#include <iterator>

#include "core/quorum_state.h"

namespace lw {

// The agent as a whole: what it is, and its state as of the last snapshot.
struct Metrics::StateGauges {
  explicit StateGauges(stats::Registry& r) : r_(r) {}
  stats::Registry& r_;
  stats::Gauge locks_held{r_, "lockwarden_locks_held",
                          "Locks currently granted through this agent."};
  stats::Gauge sessions{r_, "lockwarden_sessions", "Client connections open on the socket."};
  stats::Gauge waiters{r_, "lockwarden_waiters", "Acquire requests queued across all resources."};
  stats::Gauge oldest_wait{r_, "lockwarden_oldest_wait_seconds",
                           "How long this agent's longest-queued acquire has waited (0: none)."};
  stats::Gauge masters{r_, "lockwarden_masters", "Masters configured."};
  stats::Gauge masters_up{r_, "lockwarden_masters_up", "Masters connected and answering."};
  stats::Gauge quorum{r_, "lockwarden_quorum_size", "Votes a lock needs: masters/2 + 1."};
  stats::Gauge margin{r_, "lockwarden_quorum_margin",
                      "Usable masters (up, not in restart quarantine) - quorum_size; below 0 no "
                      "lock can be granted."};
  stats::Gauge start_time{r_, "lockwarden_start_time_seconds", "Unix time the agent started."};
};

Metrics::Metrics(const std::vector<std::string>& master_addrs, const BuildInfo& build)
    : registry_(std::make_shared<stats::Registry>()),
      state_(std::make_unique<StateGauges>(*registry_)) {
  const double masters = static_cast<double>(master_addrs.size());
  const double quorum = static_cast<double>(master_addrs.size() / 2 + 1);
  state_->masters.Set(masters);
  state_->quorum.Set(quorum);
  state_->margin.Set(-quorum);  // nothing is usable until the first snapshot says so
  stats::Gauge(*registry_, "lockwarden_build_info",
               "Version and commit of the running agent; always 1.",
               {{"version", build.version}, {"commit", build.commit}})
      .Set(1);
  state_->start_time.Set(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

Metrics::~Metrics() = default;

void Metrics::SetState(const StateSample& s) {
  state_->locks_held.Set(static_cast<double>(s.locks_held));
  state_->sessions.Set(static_cast<double>(s.sessions));
  state_->waiters.Set(static_cast<double>(s.waiters));
  state_->oldest_wait.Set(static_cast<double>(s.oldest_wait_ms) / 1000.0);
  state_->masters.Set(s.masters);
  state_->masters_up.Set(s.masters_up);
  state_->quorum.Set(s.quorum);
  state_->margin.Set(QuorumMargin({s.masters, s.masters_up, s.masters_usable, s.quorum}));
}

void Metrics::AddConditional(std::shared_ptr<stats::Registry> registry,
                             std::function<bool()> included) {
  std::lock_guard lock(conditional_mu_);
  conditional_.push_back({std::move(registry), std::move(included)});
}

std::string Metrics::Serialize() const {
  auto families = registry_->Collect();
  {
    std::lock_guard lock(conditional_mu_);
    for (const Conditional& c : conditional_) {
      if (!c.included()) continue;
      auto more = c.registry->Collect();
      families.insert(families.end(), std::make_move_iterator(more.begin()),
                      std::make_move_iterator(more.end()));
    }
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace lw
