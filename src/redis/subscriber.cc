#include "redis/subscriber.h"

#include <hiredis/async.h>
#include <spdlog/spdlog.h>

#include <cstring>

#include "redis/reply.h"

namespace lw {

Subscriber::Subscriber(uv_loop_t* loop, MasterAddress address, SubscriberOptions options,
                       MessageHandler on_message)
    : address_(std::move(address)),
      display_(address_.Display()),
      options_(options),
      on_message_(std::move(on_message)),
      conn_(loop, address_,
            {options_.connect_timeout_ms, options_.reconnect_max_backoff_ms,
             address_.password.empty() ? "no connection" : "no connection and AUTH",
             // Notice a peer that vanished without a FIN: subscribe connections are silent for
             // long.
             /*keepalive=*/true},
            *this),
      idle_timer_(loop) {}

Subscriber::~Subscriber() { Stop(); }

void Subscriber::Subscribe(const std::string& channel) {
  if (state_ == State::kStopped || !channels_.insert(channel).second) return;
  idle_timer_.Stop();
  if (state_ == State::kIdle) {
    Connect();
  } else if (state_ == State::kReady) {
    Send("SUBSCRIBE", {channel});
  }  // else: subscribed with the others once connected
}

void Subscriber::Unsubscribe(const std::string& channel) {
  if (channels_.erase(channel) == 0) return;
  if (state_ == State::kReady) Send("UNSUBSCRIBE", {channel});
  if (channels_.empty() && state_ != State::kIdle && state_ != State::kStopped) {
    idle_timer_.Start(options_.idle_close_ms, [this] { GoIdle(); });
  }
}

void Subscriber::Stop() {
  if (state_ == State::kStopped) return;
  state_ = State::kStopped;  // first: the drop below schedules no reconnect
  conn_.Drop("agent stopping");
  conn_.StopTimers();
  idle_timer_.Stop();
  channels_.clear();
}

void Subscriber::Connect() {
  state_ = State::kConnecting;
  if (auto error = conn_.Open()) Lost(*error, /*refused=*/false);
}

void Subscriber::OnPush(redisAsyncContext* ac, void* reply, void* /*privdata*/) {
  Connection* conn = Connection::Of(ac);
  if (conn == nullptr || reply == nullptr) return;
  auto* self = static_cast<Subscriber*>(&conn->listener());
  const Reply r = ReadReply(static_cast<const redisReply*>(reply));
  if (r.kind != Reply::Kind::kArray || r.elements.size() != 3) return;
  // ["message", channel, payload]; ["subscribe", channel, count]
  const std::string& kind = r.elements[0].text;
  const std::string& channel = r.elements[1].text;
  if (kind == "message") {
    // A message may still arrive for a channel just unsubscribed: nobody wants it.
    if (self->channels_.count(channel) != 0) self->on_message_(channel, r.elements[2].text);
  } else if (kind == "subscribe" && !self->refusal_.empty()) {
    spdlog::info("master {} accepts the subscription to {} again", self->display_,
                 self->options_.carries);
    self->refusal_.clear();
  }
}

void Subscriber::Opened() {
  conn_.Established();
  state_ = State::kReady;
  if (channels_.empty()) return;  // the idle timer closes it unless a channel comes first
  spdlog::debug("master {}: listening for {} on {} channel(s)", display_, options_.carries,
                channels_.size());
  Send("SUBSCRIBE", std::vector<std::string>(channels_.begin(), channels_.end()));
}

void Subscriber::Send(const char* command, const std::vector<std::string>& channels) {
  std::vector<const char*> argv{command};
  std::vector<size_t> lens{std::strlen(command)};
  for (const auto& c : channels) {
    argv.push_back(c.data());
    lens.push_back(c.size());
  }
  // Replies to both come to OnPush (hiredis keeps SUBSCRIBE's callback per channel and gives
  // UNSUBSCRIBE none). A refused send (the connection is closing) needs nothing: the
  // reconnect subscribes every wanted channel.
  redisAsyncCommandArgv(conn_.context(), OnPush, nullptr, static_cast<int>(argv.size()),
                        argv.data(), lens.data());
}

void Subscriber::Lost(const std::string& why, bool refused) {
  if (state_ == State::kStopped) return;
  const bool was_ready = state_ == State::kReady;
  state_ = State::kIdle;
  if (channels_.empty()) return;  // nobody listens: stay closed until someone does
  if (refused) {
    if (why != refusal_) {
      spdlog::warn("master {} refused the subscription to {} ({}); {}", display_, options_.carries,
                   why, options_.refusal_means);
    }
    refusal_ = why;
    ScheduleReconnect(options_.idle_close_ms);
    return;
  }
  spdlog::debug("master {}: {}: {}: {}", display_, options_.carries,
                was_ready ? "connection lost" : "connect attempt failed", why);
  ScheduleReconnect(conn_.NextBackoffMs());
}

void Subscriber::ScheduleReconnect(int64_t delay_ms) {
  state_ = State::kWaiting;
  conn_.RetryIn(delay_ms, [this] {
    if (state_ != State::kWaiting) return;
    if (channels_.empty()) {
      state_ = State::kIdle;
      return;
    }
    Connect();
  });
}

void Subscriber::GoIdle() {
  if (state_ == State::kStopped || !channels_.empty()) return;
  conn_.StopTimers();
  conn_.ResetBackoff();
  if (conn_.context() != nullptr) {
    spdlog::debug("master {}: no {} to listen for; closing that connection", display_,
                  options_.carries);
    conn_.Drop("idle");
  }
  state_ = State::kIdle;
}

}  // namespace lw
