#include "redis/node_client.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <vector>

#include "core/duration.h"
#include "redis/info.h"
#include "redis/uv_adapter.h"

namespace lw {
namespace {

constexpr int64_t kTickMs = 100;  // stall checks; health PINGs go every health_interval
constexpr std::chrono::seconds kInfoInterval{5};

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

NodeEvents& Untold() {
  static NodeEvents untold;
  return untold;
}

std::unique_ptr<stats::Registry> RegistryIfNone(const NodeStats* stats) {
  return stats ? nullptr : std::make_unique<stats::Registry>();
}

std::chrono::milliseconds CeilMs(std::chrono::steady_clock::duration d) {
  return std::chrono::ceil<std::chrono::milliseconds>(d);
}

}  // namespace

NodeClient::NodeClient(uv_loop_t* loop, MasterAddress address, NodeClientOptions options)
    : address_(std::move(address)),
      display_(address_.Display()),
      options_(options),
      own_registry_(RegistryIfNone(options.stats)),
      own_stats_(own_registry_ ? std::make_unique<NodeStats>(*own_registry_, display_) : nullptr),
      stats_(options.stats ? *options.stats : *own_stats_),
      events_(options.events ? *options.events : Untold()),
      conn_(loop, address_,
            {options.connect_timeout_ms, options.reconnect_max_backoff_ms,
             "no connection and handshake", /*keepalive=*/false},
            *this),
      health_timer_(loop),
      fail_timer_(loop),
      stall_check_(loop) {}

NodeClient::~NodeClient() { Stop(); }

void NodeClient::Start() {
  if (state_ != State::kIdle) return;
  health_timer_.StartRepeat(kTickMs, [this] { HealthTick(); });
  Connect();
}

void NodeClient::Stop() {
  if (state_ == State::kStopped) return;
  // Stopped first: commands issued by handlers failing during the drop are refused, and no
  // reconnect is scheduled.
  state_ = State::kStopped;
  conn_.Drop("agent stopping");
  conn_.StopTimers();
  health_timer_.Stop();
}

void NodeClient::Connect() {
  state_ = State::kConnecting;
  if (auto error = conn_.Open()) {
    last_error_ = *error;
    state_ = State::kIdle;
    CountConnectFailure(*error);
    ScheduleReconnect();
    return;
  }
  ++generation_;
}

void NodeClient::OnReply(redisAsyncContext* /*ac*/, void* reply, void* privdata) {
  std::unique_ptr<Pending> pending(static_cast<Pending*>(privdata));
  NodeClient* self = pending->owner;
  const auto* r = static_cast<const redisReply*>(reply);
  if (pending->generation == self->generation_ && !self->sent_.empty()) self->sent_.pop_front();
  if (r != nullptr && pending->generation == self->run_id_generation_) {
    self->run_alive_at_ = Clock::now();  // evidence that run_id_ was still running
  }
  if (!pending->calls.empty()) return self->AnswerBatch(std::move(pending), r);
  self->HandleReply(std::move(pending), ReadReply(r));
}

void NodeClient::HandleReply(std::unique_ptr<Pending> pending, Reply reply) {
  if (pending->command != NodeCommand::kCount) {
    if (reply.kind == Reply::Kind::kDisconnected) {
      ReportError(NodeError::kDisconnected);
    } else {
      Answered(pending->command, Clock::now() - pending->sent_at, reply);
    }
  }
  pending->handler(reply);
}

void NodeClient::Opened() {
  state_ = State::kHandshaking;
  handshake_left_ = 0;
  auto step = [this](const char* what) {
    ++handshake_left_;
    return [this, what](const Reply& r) { HandshakeStep(r, what); };
  };
  SetBeforeWrite(conn_.context(), FlushBatchOf, this);
  for (size_t i = 0; i <= kScripts; ++i) {
    SendInternal({"SCRIPT", "LOAD", ScriptBody(i)},
                 [this, i, s = step("SCRIPT LOAD")](const Reply& r) {
                   if (r.kind == Reply::Kind::kString) shas_[i] = r.text;
                   s(r);
                 });
  }
  // Ready only once we know who answers: a restarted master must not vote before we know.
  // A refused INFO (renamed command, ACL) does not fail the handshake; it quarantines.
  last_info_sent_ = Clock::now();
  SendInternal({"INFO", "server"},
               [this, s = step("INFO server"), generation = generation_](const Reply& r) {
                 const bool answered = r.kind != Reply::Kind::kDisconnected &&
                                       r.kind != Reply::Kind::kUnavailable;
                 if (!answered || generation != generation_ || state_ != State::kHandshaking) {
                   return s(r);
                 }
                 InfoReceived(r, /*handshake=*/true);
                 Reply ok;
                 ok.kind = Reply::Kind::kStatus;
                 s(ok);
               });
  SendInternal({"PING"}, step("PING"));
}

void NodeClient::HandshakeStep(const Reply& reply, const char* what) {
  if (state_ != State::kHandshaking) return;
  // The connection is going away: Lost says why (the server closed it, or a deadline passed).
  if (reply.kind == Reply::Kind::kDisconnected) return;
  if (reply.kind == Reply::Kind::kError || reply.kind == Reply::Kind::kUnavailable) {
    conn_.Drop(std::string(what) + " failed: " +
                   (reply.text.empty() ? "connection lost" : reply.text));
    return;
  }
  if (--handshake_left_ == 0) BecomeReady();
}

void NodeClient::BecomeReady() {
  conn_.Established();
  state_ = State::kReady;
  const bool reconnected = ever_ready_;
  if (reconnected) ++reconnects_;
  ever_ready_ = true;
  last_error_.clear();
  last_failure_logged_ = ConnectFailure::kCount;
  stats_.up.Set(1);
  events_.Up();
  if (reconnected) stats_.reconnects.Inc();
  // Measure the round trip at the next tick rather than a full interval from now.
  last_health_ping_ = Clock::now() - std::chrono::milliseconds(options_.health_interval_ms);
  spdlog::info("master {} is up", display_);
}

void NodeClient::Lost(const std::string& why, bool /*refused*/) {
  const bool was_ready = state_ == State::kReady;
  sent_.clear();
  ++generation_;
  health_ping_in_flight_ = false;
  info_in_flight_ = false;  // its reply (if any) belongs to the old generation and is ignored
  last_error_ = why;
  if (state_ == State::kStopped) return FailQueued();
  state_ = State::kIdle;
  FailQueued();
  if (was_ready) {
    stats_.up.Set(0);
    events_.Down(why);
    spdlog::warn("master {} is down: {}", display_, why);
  } else {
    CountConnectFailure(why);
  }
  ScheduleReconnect();
}

void NodeClient::CountConnectFailure(const std::string& why) {
  ReportError(NodeError::kConnectFailed);
  stats_.connect_failures[conn_.last_failure()].Inc();
  events_.ConnectFailed(why);
  // The first failure of a kind in a row is worth a warning (a certificate problem is not
  // transient); the retries after it are not.
  if (conn_.last_failure() != last_failure_logged_) {
    last_failure_logged_ = conn_.last_failure();
    spdlog::warn("master {}: connect attempt failed: {}", display_, why);
  } else {
    spdlog::debug("master {}: connect attempt failed: {}", display_, why);
  }
}

void NodeClient::ScheduleReconnect() {
  if (state_ == State::kStopped) return;
  conn_.RetryIn(conn_.NextBackoffMs(), [this] {
    if (state_ == State::kIdle) Connect();
  });
}

void NodeClient::HealthTick() {
  const auto now = Clock::now();
  EndQuarantineIfOver(now);
  if (state_ != State::kReady) return;
  if (Stalled(now)) {
    // Judged again after the loop's next poll: after a long turn of the loop, the answer may
    // already wait in the socket (AfterPoll).
    stall_check_.Arm([this] {
      if (state_ != State::kReady || !Stalled(Clock::now())) return;
      ReportError(NodeError::kStalled);
      conn_.Drop("no reply for " + std::to_string(options_.connect_timeout_ms) +
                 " ms (stalled)");
    });
    return;
  }
  if (!info_in_flight_ && now - last_info_sent_ >= kInfoInterval) SendInfo(now);
  if (health_ping_in_flight_ ||
      now - last_health_ping_ < std::chrono::milliseconds(options_.health_interval_ms)) {
    return;
  }
  health_ping_in_flight_ = true;
  last_health_ping_ = now;
  SendInternal({"PING"}, [this, now](const Reply& r) {
    health_ping_in_flight_ = false;
    if (r.kind == Reply::Kind::kStatus) rtt_ms_ = MsSince(now);
  }, NodeCommand::kPing);
}

bool NodeClient::Stalled(Clock::time_point now) const {
  return !sent_.empty() &&
         now - sent_.front() > std::chrono::milliseconds(options_.connect_timeout_ms);
}

void NodeClient::SendInfo(Clock::time_point now) {
  info_in_flight_ = true;
  last_info_sent_ = now;
  // Not measured (NodeCommand::kCount): the command metrics have no label for it.
  SendInternal({"INFO", "server"}, [this, generation = generation_](const Reply& r) {
    if (generation != generation_) return;  // that connection is gone; the flag was reset
    info_in_flight_ = false;
    InfoReceived(r, /*handshake=*/false);
  });
}

void NodeClient::InfoReceived(const Reply& reply, bool handshake) {
  const auto now = Clock::now();
  const std::chrono::milliseconds max_ttl(options_.max_ttl_ms);
  const ServerInfo info =
      reply.kind == Reply::Kind::kString ? ParseInfoServer(reply.text) : ServerInfo{};
  if (info.run_id.empty() || !info.uptime_s) {
    const std::string why =
        reply.kind != Reply::Kind::kString
            ? "INFO server failed (" + (reply.text.empty() ? "no answer" : reply.text) + ")"
            : "INFO server did not say run_id and uptime_in_seconds";
    if (!handshake) {
      // The connection's first answer decided; a later refusal changes nothing.
      spdlog::debug("master {}: {}", display_, why);
    } else if (options_.restart_quarantine) {
      Quarantine(UnknownStart(now, why, max_ttl), now);
    } else {
      spdlog::warn("master {}: {}; cannot tell whether it restarted", display_, why);
    }
    return;
  }
  const QuarantineVerdict verdict =
      JudgeSighting({now, *info.uptime_s, info.run_id},
                    {run_id_, run_started_at_, run_alive_at_}, max_ttl);
  if (verdict.restarted) {
    // Its keys, and so every lock it granted, are gone unless it persists every write.
    spdlog::warn("master {} restarted: run_id {} -> {}, up {} s", display_, run_id_, info.run_id,
                 *info.uptime_s);
  }
  run_id_ = info.run_id;
  run_started_at_ = verdict.started_at;
  run_alive_at_ = now;
  run_id_generation_ = generation_;
  uptime_s_ = info.uptime_s;
  uptime_at_ = now;
  uptime_generation_ = generation_;
  if (options_.restart_quarantine) Quarantine(verdict, now);
}

void NodeClient::Quarantine(const QuarantineVerdict& verdict, Clock::time_point now) {
  const bool was = !votes_count();
  if (!verdict.until) {
    if (was) quarantine_until_ = now;  // the facts say it is old enough after all
    EndQuarantineIfOver(now);
    return;
  }
  quarantine_until_ = verdict.until;
  quarantine_ = verdict;
  // The same quarantine, its end unchanged: already told.
  if (was && !verdict.restarted && !verdict.start_moved_later) return;
  const auto left = CeilMs(*verdict.until - now);
  if (was && !verdict.restarted) {
    spdlog::warn("master {}: its uptime went back (its clock was stepped?); the restart "
                 "quarantine now ends in {}", display_, FormatDurationMs(left.count()));
    return;
  }
  spdlog::warn("master {} is quarantined for {}: {}; until then its votes do not count toward "
               "quorum", display_, FormatDurationMs(left.count()), QuarantineReason(verdict, now));
  stats_.quarantined.Set(1);
  events_.QuarantineEntered(QuarantineReason(verdict, now), left);
}

void NodeClient::EndQuarantineIfOver(Clock::time_point now) {
  if (!quarantine_until_ || now < *quarantine_until_) return;
  quarantine_until_.reset();
  spdlog::info("master {}: restart quarantine over, its votes count again", display_);
  stats_.quarantined.Set(0);
  events_.QuarantineLeft();
}

bool NodeClient::votes_count() const {
  return !quarantine_until_ || Clock::now() >= *quarantine_until_;
}

void NodeClient::ReportError(NodeError kind) {
  ++errors_;
  stats_.errors[kind].Inc();
}

void NodeClient::Answered(NodeCommand command, Clock::duration latency, const Reply& reply) {
  latency_.Add(latency);
  stats_.latency.ObserveSeconds(latency);
  stats_.requests[command].Inc();
  if (reply.kind == Reply::Kind::kError) ReportError(NodeError::kErrorReply);
}

void NodeClient::SendInternal(std::initializer_list<std::string_view> args, ReplyHandler handler,
                              NodeCommand command) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (auto a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto p = std::make_unique<Pending>();
  p->handler = std::move(handler);
  p->command = command;
  Send(static_cast<int>(argv.size()), argv.data(), lens.data(), std::move(p));
}

void NodeClient::Send(int argc, const char** argv, const size_t* lens,
                      std::unique_ptr<Pending> pending) {
  redisAsyncContext* ac = conn_.context();
  if (ac == nullptr) {
    FailSoon(std::move(pending->handler));
    return;
  }
  pending->owner = this;
  pending->generation = generation_;
  Pending* raw = pending.get();
  if (redisAsyncCommandArgv(ac, OnReply, raw, argc, argv, lens) != REDIS_OK) {
    FailSoon(std::move(pending->handler));
    return;
  }
  pending.release();  // owned by hiredis until OnReply
  raw->sent_at = Clock::now();
  sent_.push_back(raw->sent_at);
}

void NodeClient::FailSoon(ReplyHandler handler) {
  to_fail_.push_back(std::move(handler));
  if (fail_timer_.active()) return;
  fail_timer_.Start(0, [this] {
    std::deque<ReplyHandler> batch;
    batch.swap(to_fail_);
    Reply unavailable;
    unavailable.kind = Reply::Kind::kUnavailable;
    unavailable.text = last_error_;
    for (auto& h : batch) {
      ReportError(NodeError::kUnavailable);
      h(unavailable);
    }
  });
}

NodeStatus NodeClient::status() const {
  NodeStatus s;
  s.addr = display_;
  s.tls = TlsModeOf(address_);
  s.up = state_ == State::kReady;
  s.rtt_ms = rtt_ms_;
  s.reconnects = reconnects_;
  s.last_error = last_error_;
  s.rtt_p50_ms = latency_.QuantileMs(0.50);
  s.rtt_p99_ms = latency_.QuantileMs(0.99);
  s.errors = errors_;
  if (s.up && uptime_s_ && uptime_generation_ == generation_) {
    s.uptime_s = *uptime_s_ +
                 std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - uptime_at_).count();
  }
  s.run_id = run_id_;
  const auto now = Clock::now();
  if (quarantine_until_ && now < *quarantine_until_) {
    s.quarantined = true;
    s.quarantine_left_ms = CeilMs(*quarantine_until_ - now).count();
    s.quarantine_reason = QuarantineReason(quarantine_, now);
  }
  return s;
}

}  // namespace lw
