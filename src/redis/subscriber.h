#pragma once
// Subscriber: one asynchronous hiredis connection to one master in subscribe mode, driven by the
// libuv loop. It carries release announcements (scripts::ReleaseChannel) to waiters in this
// agent, and the agent's own channels (the fleet's revoke orders); lock commands never go
// through it.
//
// Lazy: there is no connection while no channel is wanted. The first Subscribe connects; once
// the last channel is unsubscribed the connection is closed after idle_close_ms, so an agent
// that never waits for a key held elsewhere holds no extra connection.
// Connect + AUTH must finish within connect_timeout (redis/connection.h); a lost connection is reconnected with exponential backoff up to
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

#include "core/defaults.h"
#include "core/master_address.h"
#include "redis/connection.h"
#include "redis/timer.h"

struct redisAsyncContext;

namespace lw {

struct SubscriberOptions {
  int64_t connect_timeout_ms = kDefaultConnectTimeoutMs;
  int64_t reconnect_max_backoff_ms = kDefaultReconnectMaxBackoffMs;
  int64_t idle_close_ms = 30'000;  // no channel for this long: close the connection
  // For the log: what the connection carries, and what a refused subscription costs.
  std::string carries = "release announcements";
  std::string refusal_means = "waiters for keys held elsewhere wait out their retry delay";
};

class Subscriber final : Connection::Listener {
 public:
  // Called with the channel and the payload of every "message" on a channel still wanted. It
  // may call Subscribe, Unsubscribe and Stop.
  using MessageHandler =
      std::function<void(const std::string& channel, const std::string& message)>;

  Subscriber(uv_loop_t* loop, MasterAddress address, SubscriberOptions options,
             MessageHandler on_message);
  ~Subscriber() override;
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

  static void OnPush(redisAsyncContext* ac, void* reply, void* privdata);

  void Connect();
  // Connection::Listener: connected and authenticated.
  void Opened() override;
  // command: SUBSCRIBE or UNSUBSCRIBE.
  void Send(const char* command, const std::vector<std::string>& channels);
  // Connection::Listener. refused: the server answered with an error (hiredis closes the
  // connection on an error reply to SUBSCRIBE), so trying again soon would only be refused
  // again.
  void Lost(const std::string& why, bool refused) override;
  void ScheduleReconnect(int64_t delay_ms);
  void GoIdle();

  MasterAddress address_;
  std::string display_;
  SubscriberOptions options_;
  MessageHandler on_message_;
  State state_ = State::kIdle;
  Connection conn_;
  std::set<std::string> channels_;  // wanted; subscribed on the connection once kReady
  std::string refusal_;  // the last refusal warned about; "" once a subscription went through
  Timer idle_timer_;
};

}  // namespace lw
