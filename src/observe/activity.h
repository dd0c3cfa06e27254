#pragma once
// Activity: what the operator page remembers about the recent past. It hears the engine's
// events (EngineEvents) and the master connections' (NodeEvents); the ones an operator cares
// about become events (EventLog) or points of the acquire history (AcquireHistory). Counts are
// not here: each room counts its own (stats/stats.h). Loop thread only, like the reports.

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "locking/engine_events.h"
#include "observe/recent.h"
#include "redis/node.h"

namespace lw {

class Activity final : public EngineEvents {
 public:
  // describe_session: "pid 4242 (python3 worker.py)" for a session id; now_unix_ms: the clock.
  Activity(EventLog& events,
           std::function<std::string(uint64_t session)> describe_session,
           std::function<int64_t()> now_unix_ms);
  ~Activity() override;

  // The events listener to give master `index` (addr for messages).
  NodeEvents& Node(size_t index, const std::string& addr);

  // The acquire history at `now` (any thread).
  std::vector<HistoryPoint> HistoryPoints(int64_t now_unix_ms) const;

  // EngineEvents
  void Lost(SessionId session, const std::string& resource, const std::string& token,
            std::string_view reason) override {
    Lost(session, resource, token, reason, Severity::kError);
  }
  // severity: kInfo for an end that is expected (a detached lease's ttl).
  void Lost(SessionId session, const std::string& resource, const std::string& token,
            std::string_view reason, Severity severity);
  void AcquireFinished(AcquireOutcome outcome, std::chrono::nanoseconds waited,
                       int attempts) override;
  void AcquireFailed(SessionId session, std::string_view resource, ErrorCode code) override;

 private:
  class NodeActivity;
  void Record(std::string kind, Severity severity, std::string message);

  EventLog& events_;
  std::function<std::string(uint64_t)> describe_session_;
  std::function<int64_t()> now_;
  mutable std::mutex history_mu_;  // the loop records, admin threads read
  AcquireHistory history_;
  std::vector<std::unique_ptr<NodeActivity>> nodes_;
};

}  // namespace lw
