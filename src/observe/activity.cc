#include "observe/activity.h"

#include <nlohmann/json.hpp>

#include "core/duration.h"
#include "core/quote.h"

namespace lw {
namespace {

// Resource names and keys are client-chosen (core/quote.h).
std::string Quote(std::string_view text) { return QuoteClientText(text); }

}  // namespace

class Activity::NodeActivity final : public NodeEvents {
 public:
  NodeActivity(Activity& owner, std::string addr) : owner_(owner), addr_(std::move(addr)) {}

  void ConnectFailed(const std::string& /*why*/) override {
    // A master that has never been up is down too: say so once, not per connect attempt.
    if (!up_.has_value()) {
      up_ = false;
      owner_.Record("master_down", Severity::kError,
                    "master " + addr_ + " is unreachable (never connected since start)");
    }
  }
  void Up() override {
    if (up_ == true) return;
    const bool first = !up_.has_value();
    up_ = true;
    owner_.Record("master_up", first ? Severity::kInfo : Severity::kWarning,
                  "master " + addr_ + (first ? " connected" : " is back up"));
  }
  void Down(const std::string& /*why*/) override {
    if (up_ == false) return;
    up_ = false;
    owner_.Record("master_down", Severity::kError, "master " + addr_ + " is down");
  }
  void QuarantineEntered(const std::string& reason, std::chrono::milliseconds left) override {
    owner_.Record("master_quarantined", Severity::kWarning,
                  "master " + addr_ + " is quarantined for " + FormatDurationMs(left.count()) +
                      " (its votes do not count toward quorum): " + reason);
  }
  void QuarantineLeft() override {
    owner_.Record("master_quarantine_ended", Severity::kInfo,
                  "master " + addr_ + ": restart quarantine over, its votes count again");
  }

 private:
  Activity& owner_;
  std::string addr_;
  std::optional<bool> up_;  // none: no news yet
};

Activity::Activity(EventLog& events,
                   std::function<std::string(uint64_t session)> describe_session,
                   std::function<int64_t()> now_unix_ms)
    : events_(events),
      describe_session_(std::move(describe_session)),
      now_(std::move(now_unix_ms)) {}

Activity::~Activity() = default;

NodeEvents& Activity::Node(size_t index, const std::string& addr) {
  if (nodes_.size() <= index) nodes_.resize(index + 1);
  nodes_[index] = std::make_unique<NodeActivity>(*this, addr);
  return *nodes_[index];
}

void Activity::Record(std::string kind, Severity severity, std::string message) {
  events_.Add({now_(), std::move(kind), severity, std::move(message), 1});
}

void Activity::Lost(SessionId session, const std::string& resource, const std::string& /*token*/,
                    std::string_view reason, Severity severity) {
  Record("lock_lost", severity,
         "lock " + Quote(resource) + " lost (" + std::string(reason) + "), held by " +
             describe_session_(session));
}

void Activity::AcquireFinished(AcquireOutcome outcome, std::chrono::nanoseconds waited,
                               int /*attempts*/) {
  const int64_t now = now_();
  std::lock_guard lock(history_mu_);
  history_.Record(now, outcome, std::chrono::duration<double, std::milli>(waited).count());
}

std::vector<HistoryPoint> Activity::HistoryPoints(int64_t now_unix_ms) const {
  std::lock_guard lock(history_mu_);
  return history_.Points(now_unix_ms);
}

void Activity::AcquireFailed(SessionId session, std::string_view resource, ErrorCode code) {
  if (code == ErrorCode::kShuttingDown) return;
  const std::string name(ErrorCodeName(code));
  const Severity severity = code == ErrorCode::kTimeout ? Severity::kWarning : Severity::kError;
  events_.AddNoisy({now_(), "acquire_failed", severity,
                    "acquire of " + Quote(resource) + " failed (" + name + ") for " +
                        describe_session_(session),
                    1},
                   name + " " + std::string(resource));
}

}  // namespace lw
