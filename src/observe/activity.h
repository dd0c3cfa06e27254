#pragma once
// Activity: what the operator page remembers about the recent past. It sits between the engine
// and its metrics observer (every report is passed on unchanged) and hears the master
// connections' events (NodeEvents); the reports an operator cares about become events
// (EventLog) or points of the acquire history (AcquireHistory). Loop thread only, like the
// reports.

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "locking/engine_observer.h"
#include "observe/recent.h"
#include "redis/node.h"

namespace lw {

class Activity final : public EngineObserver {
 public:
  // describe_session: "pid 4242 (python3 worker.py)" for a session id; now_unix_ms: the clock.
  Activity(EngineObserver& next, EventLog& events,
           std::function<std::string(uint64_t session)> describe_session,
           std::function<int64_t()> now_unix_ms);
  ~Activity() override;

  // The events listener to give master `index` (addr for messages).
  NodeEvents& Node(size_t index, const std::string& addr);

  // A lock was taken away from its holder (the engine's lost handler).
  void Lost(uint64_t session, const std::string& resource, std::string_view reason);

  // The acquire history at `now` (any thread).
  std::vector<HistoryPoint> HistoryPoints(int64_t now_unix_ms) const;

  // EngineObserver
  void AcquireFinished(AcquireOutcome outcome, std::chrono::nanoseconds waited,
                       int attempts) override;
  void AcquireFailed(uint64_t session, std::string_view resource, ErrorCode code) override;
  void HoldEnded(std::chrono::nanoseconds held) override { next_.HoldEnded(held); }
  void Renewed(RenewOutcome outcome) override { next_.Renewed(outcome); }
  void LocalHandOff() override { next_.LocalHandOff(); }
  void FenceRound(FenceOutcome outcome) override { next_.FenceRound(outcome); }
  void LockLost(std::string_view reason) override { next_.LockLost(reason); }
  void MasterMissedDeadline(size_t index) override { next_.MasterMissedDeadline(index); }

 private:
  class NodeActivity;
  void Record(std::string kind, Severity severity, std::string message);

  EngineObserver& next_;
  EventLog& events_;
  std::function<std::string(uint64_t)> describe_session_;
  std::function<int64_t()> now_;
  mutable std::mutex history_mu_;  // the loop records, admin threads read
  AcquireHistory history_;
  std::vector<std::unique_ptr<NodeActivity>> nodes_;
};

}  // namespace lw
