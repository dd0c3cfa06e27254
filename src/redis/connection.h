#pragma once
// Connection: the one place an asynchronous connection to a master is opened, authenticated,
// dropped and retried. One hiredis context at a time on the libuv loop; NodeClient and
// Subscriber speak their protocol over it and own their state machines.
//
// hiredis 0.14 has no timeouts, so this class keeps the opening deadline: from Open() until
// the owner calls Established() (its handshake done), at most connect_timeout_ms, after which
// the context is dropped with "<opening> within N ms". Once the socket connects, a rediss://
// address gets its TLS handshake (redis/tls.h: the adapter then does the socket's I/O), then
// AUTH (when the address has a password) is sent; a refusal drops the context with
// AuthFailed(...). Every failure before Established() has a ConnectFailure kind (last_failure).
// Loop thread only.

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/master_address.h"
#include "redis/connect_policy.h"
#include "redis/timer.h"
#include "redis/tls.h"

struct redisAsyncContext;

namespace lw {

class Connection {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // The socket is connected and AUTH was accepted (or there was none to send): the owner may
    // send its handshake, then call Established().
    virtual void Opened() = 0;
    // The context is gone: the attempt failed, the deadline passed, the server closed it, or
    // Drop(why) was called. refused: the server answered an error no command waited for (it
    // refused SUBSCRIBE). Every command in flight is answered with a null reply, now or right
    // after the hiredis callback running returns. Not called from the destructor.
    virtual void Lost(const std::string& why, bool refused) = 0;
  };

  struct Options {
    int64_t connect_timeout_ms = 1000;
    int64_t reconnect_max_backoff_ms = 2000;
    std::string opening = "no connection";  // what the deadline message says did not happen
    bool keepalive = false;                 // TCP keepalive (for long-silent connections)
  };

  Connection(uv_loop_t* loop, const MasterAddress& address, Options options, Listener& listener);
  ~Connection();  // drops the context without telling the listener
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts connecting (and the deadline). Returns why when the attempt cannot even start; the
  // listener is not told then.
  std::optional<std::string> Open();
  // The owner's handshake is done: stops the deadline and resets the backoff.
  void Established();
  // Closes the context (if any) and tells the listener Lost(why, false). Before Established(),
  // the failure's kind is `kind`.
  void Drop(const std::string& why, ConnectFailure kind = ConnectFailure::kHandshake);
  // Runs `attempt` after `delay_ms`, replacing any pending retry.
  void RetryIn(int64_t delay_ms, std::function<void()> attempt);
  // The next exponential backoff delay (connect_policy.h).
  int64_t NextBackoffMs() { return backoff_.Next(); }
  void ResetBackoff() { backoff_.Reset(); }
  // Stops the deadline and any pending retry (the context, if any, stays).
  void StopTimers();

  // The current context; null while there is none.
  redisAsyncContext* context() const { return ac_; }
  // The Connection that owns `ac`; null once that context was dropped.
  static Connection* Of(const redisAsyncContext* ac);
  Listener& listener() const { return listener_; }
  // Why the last attempt failed, when Lost or Open's error came before Established().
  ConnectFailure last_failure() const { return failure_; }

 private:
  static void OnConnect(const redisAsyncContext* ac, int status);
  static void OnDisconnect(const redisAsyncContext* ac, int status);
  static void OnAuth(redisAsyncContext* ac, void* reply, void* privdata);
  static void OnTls(redisAsyncContext* ac, const TlsStream* failed);
  void SendAuthOrOpen();
  void Close();  // frees the context with no owner left for its callbacks
  void Lose(const std::string& why, bool refused, ConnectFailure kind);

  // Where an attempt is: what the deadline's message and a failure's kind depend on.
  enum class Stage { kConnecting, kTls, kAuth, kOwner, kEstablished };

  uv_loop_t* loop_;
  const MasterAddress& address_;
  Options options_;
  Listener& listener_;
  redisAsyncContext* ac_ = nullptr;
  std::unique_ptr<TlsStream> tls_;  // made at Open, handed to the adapter once connected
  Stage stage_ = Stage::kConnecting;
  ConnectFailure failure_ = ConnectFailure::kConnect;
  ReconnectBackoff backoff_;
  Timer deadline_;
  Timer retry_;
};

}  // namespace lw
