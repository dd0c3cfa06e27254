#include "redis/subscriber.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "redis/uv_adapter.h"

namespace lw {
namespace {

std::string_view Text(const redisReply* r) {
  return r != nullptr && r->str != nullptr ? std::string_view(r->str, r->len) : std::string_view();
}

}  // namespace

Subscriber::Subscriber(uv_loop_t* loop, MasterAddress address, SubscriberOptions options,
                       MessageHandler on_message)
    : loop_(loop),
      address_(std::move(address)),
      display_(address_.Display()),
      options_(options),
      on_message_(std::move(on_message)),
      connect_timer_(loop),
      reconnect_timer_(loop),
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
  DropConnection("agent stopping");
  connect_timer_.Stop();
  reconnect_timer_.Stop();
  idle_timer_.Stop();
  channels_.clear();
}

void Subscriber::Connect() {
  state_ = State::kConnecting;
  std::string error;
  ac_ = ConnectOnLoop(loop_, address_.host, address_.port, this, OnConnect, OnDisconnect, &error);
  if (ac_ == nullptr) {
    ConnectionLost(error, /*refused=*/false);
    return;
  }
  const std::string what = address_.password.empty() ? "no connection" : "no connection and AUTH";
  connect_timer_.Start(options_.connect_timeout_ms, [this, what] {
    DropConnection(what + " within " + std::to_string(options_.connect_timeout_ms) + " ms");
  });
}

void Subscriber::OnConnect(const redisAsyncContext* ac, int status) {
  auto* self = static_cast<Subscriber*>(ac->data);
  if (self == nullptr || ac != self->ac_) return;
  if (status != REDIS_OK) {
    // hiredis frees the context after this callback returns.
    self->ac_ = nullptr;
    self->ConnectionLost(ac->errstr ? ac->errstr : "connect failed", /*refused=*/false);
    return;
  }
  // Notice a peer that vanished without a FIN: subscribe connections are silent for long.
  redisEnableKeepAlive(&self->ac_->c);
  if (self->address_.password.empty()) {
    self->BecomeReady();
    return;
  }
  // Not freed from here on failure (hiredis still uses the context after this callback
  // returns): the connect timer ends a connection whose AUTH was not even sent.
  const MasterAddress& a = self->address_;
  if (a.user.empty()) {
    const char* argv[] = {"AUTH", a.password.c_str()};
    const size_t lens[] = {4, a.password.size()};
    redisAsyncCommandArgv(self->ac_, OnAuth, nullptr, 2, argv, lens);
  } else {
    const char* argv[] = {"AUTH", a.user.c_str(), a.password.c_str()};
    const size_t lens[] = {4, a.user.size(), a.password.size()};
    redisAsyncCommandArgv(self->ac_, OnAuth, nullptr, 3, argv, lens);
  }
}

void Subscriber::OnDisconnect(const redisAsyncContext* ac, int /*status*/) {
  auto* self = static_cast<Subscriber*>(ac->data);
  if (self == nullptr || ac != self->ac_) return;  // a connection we already dropped
  self->ac_ = nullptr;
  // REDIS_ERR_OTHER: the server answered an error nobody waited for, i.e. it refused SUBSCRIBE.
  self->ConnectionLost(ac->err ? ac->errstr : "connection closed by the server",
                       /*refused=*/ac->err == REDIS_ERR_OTHER);
}

void Subscriber::OnAuth(redisAsyncContext* ac, void* reply, void* /*privdata*/) {
  auto* self = static_cast<Subscriber*>(ac->data);
  const auto* r = static_cast<const redisReply*>(reply);
  // No reply: the connection is going away; its disconnect callback (if any) reports it.
  if (self == nullptr || ac != self->ac_ || r == nullptr) return;
  if (r->type == REDIS_REPLY_ERROR) {
    // Never log the command: it carries the password.
    self->DropConnection("AUTH failed: " + std::string(Text(r)));
    return;
  }
  self->BecomeReady();
}

void Subscriber::OnPush(redisAsyncContext* ac, void* reply, void* /*privdata*/) {
  auto* self = static_cast<Subscriber*>(ac->data);
  const auto* r = static_cast<const redisReply*>(reply);
  if (self == nullptr || ac != self->ac_ || r == nullptr || r->type != REDIS_REPLY_ARRAY ||
      r->elements != 3) {
    return;
  }
  const std::string_view kind = Text(r->element[0]);
  const std::string channel(Text(r->element[1]));
  if (kind == "message") {
    // A message may still arrive for a channel just unsubscribed: nobody wants it.
    if (self->channels_.count(channel) != 0) self->on_message_(channel);
  } else if (kind == "subscribe" && !self->refusal_.empty()) {
    spdlog::info("master {} accepts the subscription to release announcements again",
                 self->display_);
    self->refusal_.clear();
  }
}

void Subscriber::BecomeReady() {
  connect_timer_.Stop();
  state_ = State::kReady;
  backoff_ms_ = 0;
  if (channels_.empty()) return;  // the idle timer closes it unless a channel comes first
  spdlog::debug("master {}: listening for release announcements of {} key(s)", display_,
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
  redisAsyncCommandArgv(ac_, OnPush, nullptr, static_cast<int>(argv.size()), argv.data(),
                        lens.data());
}

void Subscriber::DropConnection(const std::string& why) {
  if (ac_ == nullptr) return;
  redisAsyncContext* ac = ac_;
  ac_ = nullptr;
  ac->data = nullptr;  // its callbacks, now or when hiredis gets to free it, find no owner
  redisAsyncFree(ac);
  ConnectionLost(why, /*refused=*/false);
}

void Subscriber::ConnectionLost(const std::string& why, bool refused) {
  connect_timer_.Stop();
  if (state_ == State::kStopped) return;
  const bool was_ready = state_ == State::kReady;
  state_ = State::kIdle;
  if (channels_.empty()) return;  // nobody listens: stay closed until someone does
  if (refused) {
    if (why != refusal_) {
      spdlog::warn(
          "master {} refused the subscription to release announcements ({}); waiters "
          "for keys held elsewhere wait out their retry delay",
          display_, why);
    }
    refusal_ = why;
    ScheduleReconnect(options_.idle_close_ms);
    return;
  }
  spdlog::debug("master {}: release announcements {}: {}", display_,
                was_ready ? "connection lost" : "connect attempt failed", why);
  backoff_ms_ =
      backoff_ms_ == 0 ? 50 : std::min(backoff_ms_ * 2, options_.reconnect_max_backoff_ms);
  ScheduleReconnect(backoff_ms_);
}

void Subscriber::ScheduleReconnect(int64_t delay_ms) {
  state_ = State::kWaiting;
  reconnect_timer_.Start(delay_ms, [this] {
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
  reconnect_timer_.Stop();
  backoff_ms_ = 0;
  if (ac_ != nullptr) {
    spdlog::debug("master {}: no release to listen for; closing that connection", display_);
    DropConnection("idle");
  }
  state_ = State::kIdle;
}

}  // namespace lw
