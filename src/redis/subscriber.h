#pragma once
// Subscriber: one asynchronous hiredis connection to one master in subscribe mode, driven by the
// libuv loop. It carries release announcements (scripts::ReleaseChannel) to waiters in this
// agent; lock commands never go through it.
//
// Lazy: there is no connection while no channel is wanted. The first Subscribe connects; once
// the last channel is unsubscribed the connection is closed after idle_close_ms, so an agent
// that never waits for a key held elsewhere holds no extra connection.
// hiredis 0.14 has no timeouts, so this class owns them: connect + AUTH must finish within
// connect_timeout; a lost connection is reconnected with exponential backoff up to
// reconnect_max_backoff, and every wanted channel is subscribed again. A master that refuses
// SUBSCRIBE (an ACL without channel access) is warned about once and tried again only after
// idle_close_ms. Best effort: what is published while the connection is down is not heard, so
// callers need another way to learn it (the engine's retry timer). Loop thread only.

#include <uv.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/defaults.h"
#include "redis/timer.h"

struct redisAsyncContext;

namespace lw {

struct SubscriberOptions {
  int64_t connect_timeout_ms = kDefaultConnectTimeoutMs;
  int64_t reconnect_max_backoff_ms = kDefaultReconnectMaxBackoffMs;
  int64_t idle_close_ms = 30'000;  // no channel for this long: close the connection
};

class Subscriber {
 public:
  // Called with the channel of every "message" on a channel still wanted. It may call
  // Subscribe, Unsubscribe and Stop.
  using MessageHandler = std::function<void(const std::string& channel)>;

  Subscriber(uv_loop_t* loop, MasterAddress address, SubscriberOptions options,
             MessageHandler on_message);
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Wants `channel` from now on (connecting if need be) until Unsubscribe(channel). Calls are
  // not counted. No-ops after Stop.
  void Subscribe(const std::string& channel);
  void Unsubscribe(const std::string& channel);
  // Closes the connection and stops every timer for good: the loop can run dry.
  void Stop();

 private:
  enum class State { kIdle, kConnecting, kReady, kWaiting, kStopped };

  static void OnConnect(const redisAsyncContext* ac, int status);
  static void OnDisconnect(const redisAsyncContext* ac, int status);
  static void OnAuth(redisAsyncContext* ac, void* reply, void* privdata);
  static void OnPush(redisAsyncContext* ac, void* reply, void* privdata);

  void Connect();
  void BecomeReady();
  // command: SUBSCRIBE or UNSUBSCRIBE.
  void Send(const char* command, const std::vector<std::string>& channels);
  void DropConnection(const std::string& why);
  // refused: the server answered with an error (hiredis closes the connection on an error
  // reply to SUBSCRIBE), so trying again soon would only be refused again.
  void ConnectionLost(const std::string& why, bool refused);
  void ScheduleReconnect(int64_t delay_ms);
  void GoIdle();

  uv_loop_t* loop_;
  MasterAddress address_;
  std::string display_;
  SubscriberOptions options_;
  MessageHandler on_message_;
  State state_ = State::kIdle;
  redisAsyncContext* ac_ = nullptr;
  std::set<std::string> channels_;  // wanted; subscribed on the connection once kReady
  int64_t backoff_ms_ = 0;
  std::string refusal_;  // the last refusal warned about; "" once a subscription went through
  Timer connect_timer_;
  Timer reconnect_timer_;
  Timer idle_timer_;
};

}  // namespace lw
