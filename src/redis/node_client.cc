#include "redis/node_client.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <vector>

#include "redis/info.h"
#include "redis/scripts.h"
#include "redis/uv_adapter.h"

namespace lw {
namespace {

constexpr int64_t kTickMs = 100;  // stall checks; health PINGs go every health_interval
constexpr std::chrono::seconds kInfoInterval{5};

Reply Flatten(const redisReply* r) {
  Reply out;
  if (r == nullptr) {
    out.kind = Reply::Kind::kDisconnected;
    return out;
  }
  switch (r->type) {
    case REDIS_REPLY_STATUS:
      out.kind = Reply::Kind::kStatus;
      break;
    case REDIS_REPLY_STRING:
      out.kind = Reply::Kind::kString;
      break;
    case REDIS_REPLY_INTEGER:
      out.kind = Reply::Kind::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_NIL:
      out.kind = Reply::Kind::kNil;
      break;
    case REDIS_REPLY_ARRAY:
      out.kind = Reply::Kind::kArray;
      break;
    default:
      out.kind = Reply::Kind::kError;
      break;
  }
  if (r->str != nullptr) out.text.assign(r->str, r->len);
  return out;
}

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

NodeObserver& Silent() {
  static NodeObserver silent;
  return silent;
}

}  // namespace

NodeClient::NodeClient(uv_loop_t* loop, MasterAddress address, NodeClientOptions options)
    : loop_(loop),
      address_(std::move(address)),
      display_(address_.Display()),
      options_(options),
      observer_(options.observer ? options.observer : &Silent()),
      connect_timer_(loop),
      reconnect_timer_(loop),
      health_timer_(loop),
      fail_timer_(loop) {}

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
  DropConnection("agent stopping");
  connect_timer_.Stop();
  reconnect_timer_.Stop();
  health_timer_.Stop();
}

void NodeClient::Connect() {
  state_ = State::kConnecting;
  // Note: redisAsyncConnect resolves host names with a blocking getaddrinfo; use addresses
  // (or names that resolve from /etc/hosts) for masters.
  redisAsyncContext* ac = redisAsyncConnect(address_.host.c_str(), address_.port);
  if (ac == nullptr || ac->err) {
    last_error_ = ac ? ac->errstr : "out of memory";
    if (ac) redisAsyncFree(ac);
    state_ = State::kIdle;
    ScheduleReconnect();
    return;
  }
  if (!AttachToLoop(ac, loop_)) {
    last_error_ = "cannot watch the socket on the event loop";
    redisAsyncFree(ac);
    state_ = State::kIdle;
    ScheduleReconnect();
    return;
  }
  ac->data = this;
  ac_ = ac;
  ++generation_;
  redisAsyncSetConnectCallback(ac, OnConnect);
  redisAsyncSetDisconnectCallback(ac, OnDisconnect);
  connect_timer_.Start(options_.connect_timeout_ms, [this] {
    DropConnection("no connection and handshake within " +
                   std::to_string(options_.connect_timeout_ms) + " ms");
  });
}

void NodeClient::OnConnect(const redisAsyncContext* ac, int status) {
  auto* self = static_cast<NodeClient*>(ac->data);
  if (self == nullptr || ac != self->ac_) return;
  if (status != REDIS_OK) {
    // hiredis frees the context after this callback returns.
    self->ac_ = nullptr;
    self->ConnectionLost(ac->errstr ? ac->errstr : "connect failed");
    return;
  }
  self->BeginHandshake();
}

void NodeClient::OnDisconnect(const redisAsyncContext* ac, int /*status*/) {
  auto* self = static_cast<NodeClient*>(ac->data);
  if (self == nullptr || ac != self->ac_) return;  // a connection we already dropped
  self->ac_ = nullptr;
  self->ConnectionLost(ac->err ? ac->errstr : "connection closed by the server");
}

void NodeClient::OnReply(redisAsyncContext* /*ac*/, void* reply, void* privdata) {
  std::unique_ptr<Pending> pending(static_cast<Pending*>(privdata));
  NodeClient* self = pending->owner;
  self->HandleReply(std::move(pending), Flatten(static_cast<redisReply*>(reply)));
}

void NodeClient::HandleReply(std::unique_ptr<Pending> pending, Reply reply) {
  if (pending->generation == generation_ && !sent_.empty()) sent_.pop_front();
  if (pending->script != Script::kNone && reply.kind == Reply::Kind::kError &&
      reply.text.rfind("NOSCRIPT", 0) == 0 && state_ == State::kReady) {
    // The script cache was flushed (SCRIPT FLUSH, or a restart we have not noticed yet):
    // send the body once; EVAL caches it again for the next EVALSHA.
    SendEval(std::move(pending), /*by_sha=*/false);
    return;
  }
  if (pending->command != NodeCommand::kCount) {
    if (reply.kind == Reply::Kind::kDisconnected) {
      ReportError(NodeError::kDisconnected);
    } else {
      const auto latency = Clock::now() - pending->sent_at;
      latency_.Add(latency);
      observer_->CommandDone(pending->command, latency);
      if (reply.kind == Reply::Kind::kError) ReportError(NodeError::kErrorReply);
    }
  }
  pending->handler(reply);
}

void NodeClient::BeginHandshake() {
  state_ = State::kHandshaking;
  handshake_left_ = 0;
  auto step = [this](const char* what) {
    ++handshake_left_;
    return [this, what](const Reply& r) { HandshakeStep(r, what); };
  };
  if (!address_.password.empty()) {
    if (address_.user.empty()) {
      SendInternal({"AUTH", address_.password}, step("AUTH"));
    } else {
      SendInternal({"AUTH", address_.user, address_.password}, step("AUTH"));
    }
  }
  SendInternal({"SCRIPT", "LOAD", scripts::kDeleteIfHeld}, [this, s = step("SCRIPT LOAD")](
                                                               const Reply& r) {
    if (r.kind == Reply::Kind::kString) delete_sha_ = r.text;
    s(r);
  });
  SendInternal({"SCRIPT", "LOAD", scripts::kExtendIfHeld}, [this, s = step("SCRIPT LOAD")](
                                                               const Reply& r) {
    if (r.kind == Reply::Kind::kString) extend_sha_ = r.text;
    s(r);
  });
  SendInternal({"PING"}, step("PING"));
}

void NodeClient::HandshakeStep(const Reply& reply, const char* what) {
  if (state_ != State::kHandshaking) return;
  if (reply.kind == Reply::Kind::kError || reply.kind == Reply::Kind::kDisconnected ||
      reply.kind == Reply::Kind::kUnavailable) {
    // Never log the command's arguments: AUTH carries the password.
    DropConnection(std::string(what) + " failed: " +
                   (reply.text.empty() ? "connection lost" : reply.text));
    return;
  }
  if (--handshake_left_ == 0) BecomeReady();
}

void NodeClient::BecomeReady() {
  connect_timer_.Stop();
  state_ = State::kReady;
  backoff_ms_ = 0;
  const bool reconnected = ever_ready_;
  if (reconnected) ++reconnects_;
  ever_ready_ = true;
  last_error_.clear();
  observer_->Up(true);
  if (reconnected) observer_->Reconnected();
  // Measure the round trip at the next tick rather than a full interval from now.
  last_health_ping_ = Clock::now() - std::chrono::milliseconds(options_.health_interval_ms);
  spdlog::info("master {} is up", display_);
  // Who answers, right away: a restart (new run_id) is worth knowing before the next tick.
  SendInfo(Clock::now());
}

void NodeClient::DropConnection(const std::string& why) {
  if (ac_ == nullptr) return;
  redisAsyncContext* ac = ac_;
  ac_ = nullptr;  // callbacks for this context now see it as stale
  // Fails every command in flight with a NULL reply (now, or right after the hiredis
  // callback we may be inside of returns).
  redisAsyncFree(ac);
  ConnectionLost(why);
}

void NodeClient::ConnectionLost(const std::string& why) {
  const bool was_ready = state_ == State::kReady;
  connect_timer_.Stop();
  sent_.clear();
  ++generation_;
  health_ping_in_flight_ = false;
  info_in_flight_ = false;  // its reply (if any) belongs to the old generation and is ignored
  last_error_ = why;
  if (state_ == State::kStopped) return;
  state_ = State::kIdle;
  if (was_ready) {
    observer_->Up(false);
    spdlog::warn("master {} is down: {}", display_, why);
  } else {
    ReportError(NodeError::kConnectFailed);
    spdlog::debug("master {}: connect attempt failed: {}", display_, why);
  }
  ScheduleReconnect();
}

void NodeClient::ScheduleReconnect() {
  if (state_ == State::kStopped) return;
  backoff_ms_ = backoff_ms_ == 0 ? 50 : std::min(backoff_ms_ * 2, options_.reconnect_max_backoff_ms);
  reconnect_timer_.Start(backoff_ms_, [this] {
    if (state_ == State::kIdle) Connect();
  });
}

void NodeClient::HealthTick() {
  if (state_ != State::kReady) return;
  const auto now = Clock::now();
  if (!sent_.empty() && now - sent_.front() > std::chrono::milliseconds(options_.connect_timeout_ms)) {
    ReportError(NodeError::kStalled);
    DropConnection("no reply for " + std::to_string(options_.connect_timeout_ms) +
                   " ms (stalled)");
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

void NodeClient::SendInfo(Clock::time_point now) {
  info_in_flight_ = true;
  last_info_sent_ = now;
  // Not measured (NodeCommand::kCount): the command metrics have no label for it.
  SendInternal({"INFO", "server"}, [this, generation = generation_](const Reply& r) {
    if (generation != generation_) return;  // that connection is gone; the flag was reset
    info_in_flight_ = false;
    InfoReceived(r);
  });
}

void NodeClient::InfoReceived(const Reply& reply) {
  if (reply.kind != Reply::Kind::kString) {
    // E.g. an ACL user without +info. Harmless: status() just has no run_id/uptime.
    spdlog::debug("master {}: INFO server failed: {}", display_,
                  reply.text.empty() ? "no answer" : reply.text);
    return;
  }
  const auto now = Clock::now();
  const ServerInfo info = ParseInfoServer(reply.text);
  const bool new_run_id = !run_id_.empty() && !info.run_id.empty() && info.run_id != run_id_;
  const bool uptime_back = uptime_s_ && info.uptime_s && *info.uptime_s < *uptime_s_;
  if (new_run_id || uptime_back) {
    // Its keys, and so every lock it granted, may be gone. Quarantine will key off this.
    auto text = [](std::optional<int64_t> v) { return v ? std::to_string(*v) : "?"; };
    const auto since = std::chrono::duration_cast<std::chrono::seconds>(now - uptime_at_).count();
    spdlog::warn("master {} restarted: run_id {} -> {}, uptime {} s (was {} s {} s ago)",
                 display_, run_id_, info.run_id.empty() ? run_id_ : info.run_id,
                 text(info.uptime_s), text(uptime_s_), uptime_s_ ? since : 0);
    previous_run_id_ = run_id_;
  }
  if (!info.run_id.empty()) run_id_ = info.run_id;
  if (info.uptime_s) {
    uptime_s_ = info.uptime_s;
    uptime_at_ = now;
    uptime_generation_ = generation_;
  }
}

void NodeClient::ReportError(NodeError kind) {
  ++errors_;
  observer_->Error(kind);
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
  if (ac_ == nullptr) {
    FailSoon(std::move(pending->handler));
    return;
  }
  pending->owner = this;
  pending->generation = generation_;
  Pending* raw = pending.get();
  if (redisAsyncCommandArgv(ac_, OnReply, raw, argc, argv, lens) != REDIS_OK) {
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

void NodeClient::SetIfAbsent(const std::string& key, const std::string& token, int64_t ttl_ms,
                             ReplyHandler handler) {
  if (state_ != State::kReady) return FailSoon(std::move(handler));
  const std::string ttl = std::to_string(ttl_ms);
  const char* argv[] = {"SET", key.data(), token.data(), "NX", "PX", ttl.data()};
  const size_t lens[] = {3, key.size(), token.size(), 2, 2, ttl.size()};
  auto p = std::make_unique<Pending>();
  p->handler = std::move(handler);
  p->command = NodeCommand::kSetNx;
  Send(6, argv, lens, std::move(p));
}

void NodeClient::DeleteIfHeld(const std::string& key, const std::string& token,
                              ReplyHandler handler) {
  Eval(Script::kDeleteIfHeld, key, token, {}, std::move(handler));
}

void NodeClient::ExtendIfHeld(const std::string& key, const std::string& token, int64_t ttl_ms,
                              ReplyHandler handler) {
  Eval(Script::kExtendIfHeld, key, token, std::to_string(ttl_ms), std::move(handler));
}

void NodeClient::Eval(Script script, const std::string& key, const std::string& arg1,
                      const std::string& arg2, ReplyHandler handler) {
  if (state_ != State::kReady) return FailSoon(std::move(handler));
  auto p = std::make_unique<Pending>();
  p->handler = std::move(handler);
  p->script = script;
  p->command = script == Script::kDeleteIfHeld ? NodeCommand::kDeleteIfHeld
                                               : NodeCommand::kExtendIfHeld;
  p->key = key;
  p->arg1 = arg1;
  p->arg2 = arg2;
  SendEval(std::move(p), /*by_sha=*/true);
}

void NodeClient::SendEval(std::unique_ptr<Pending> p, bool by_sha) {
  const bool del = p->script == Script::kDeleteIfHeld;
  const std::string& sha = del ? delete_sha_ : extend_sha_;
  const char* body = del ? scripts::kDeleteIfHeld : scripts::kExtendIfHeld;
  const char* cmd = by_sha && !sha.empty() ? "EVALSHA" : "EVAL";
  const char* what = by_sha && !sha.empty() ? sha.c_str() : body;
  const char* argv[] = {cmd, what, "1", p->key.c_str(), p->arg1.c_str(), p->arg2.c_str()};
  const size_t lens[] = {strlen(cmd), strlen(what), 1, p->key.size(), p->arg1.size(),
                         p->arg2.size()};
  Send(del ? 5 : 6, argv, lens, std::move(p));
}

NodeStatus NodeClient::status() const {
  NodeStatus s;
  s.addr = display_;
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
  return s;
}

}  // namespace lw
