#pragma once
// Server: the Unix-socket front of the agent. Accepts connections, turns each line into a
// request (protocol room), hands it to the LockEngine, and writes replies and pushed
// events back to the right session. Runs on the loop thread with the engine.

#include <uv.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "agent/session.h"
#include "core/access.h"
#include "core/defaults.h"
#include "locking/lock_engine.h"
#include "protocol/messages.h"
#include "redis/timer.h"

namespace lw {

// What the server reports to metrics, on the loop thread. op: as on the wire, or "request"
// when the line named no known op.
class RequestObserver {
 public:
  virtual ~RequestObserver() = default;
  virtual void Received(std::string_view /*op*/) {}
  virtual void Failed(std::string_view /*op*/, ErrorCode /*code*/) {}
  // A client limit refused something; limit: one of kLimitNames.
  virtual void LimitReached(std::string_view /*limit*/) {}
  virtual void AccessDenied() {}
  // A session stopped (true) or resumed (false) being read because of unsent replies.
  virtual void Backpressure(bool /*paused*/) {}
};

// The limits LimitReached reports, as labels of lockwarden_limit_refusals_total.
inline constexpr std::string_view kLimitNames[] = {
    "connections", "line_length", "inflight", "locks_per_session", "waiters_per_resource",
    "idle_timeout"};

// Bounds on what one client can make the agent hold (0: no bound).
struct ClientLimits {
  size_t max_connections = 0;
  size_t max_inflight = 0;
  size_t max_locks = 0;
  int64_t idle_timeout_ms = 0;
  size_t max_unsent_bytes = 0;
};

// Who owns the socket file and who may open it.
struct SocketAccess {
  unsigned mode = 0660;
  int owner = -1;  // uid; -1: the agent's
  int group = -1;  // gid; -1: the agent's
};

struct ServerOptions {
  std::string socket_path;
  size_t max_line_bytes = kDefaultMaxLineBytes;
  protocol::Limits limits;
  ClientLimits client_limits;
  SocketAccess socket_access;
  AccessPolicy access;  // who may lock what
  RequestObserver* observer = nullptr;  // not owned; null: nothing reported
};

class Server {
 public:
  Server(uv_loop_t* loop, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The engine is created after the server (it needs the lost-event sink below).
  void SetEngine(LockEngine* engine) { engine_ = engine; }
  // Pushes a `lost` event to the session, if it is still connected.
  void NotifyLost(SessionId session, const std::string& resource, const std::string& token,
                  std::string_view reason);

  // Creates the socket (replacing a stale file, never a live agent's) and listens.
  // Returns a human error on failure.
  std::optional<std::string> Listen();

  // Stops accepting and removes the socket file; sessions stay open so that in-flight
  // requests still get their (shutting_down) replies. CloseSessions ends them.
  void StopListening();
  void CloseSessions();
  size_t session_count() const { return sessions_.size(); }
  size_t paused_sessions() const { return paused_sessions_; }
  // Who is at the other end of a session (SO_PEERCRED and /proc at connect time).
  struct Peer {
    int pid = -1;  // -1: the session is gone
    int uid = -1;
    int gid = -1;
    std::string cmdline;
  };
  Peer PeerOf(SessionId id) const;

 private:
  void OnConnection();
  void OnLine(Session& s, std::string_view line);
  void Dispatch(Session& s, protocol::Request request);
  // Answers one request of the session (it is no longer in flight).
  void Answer(SessionId id, std::string line);
  void Answer(Session& s, std::string line);
  // Refuses a decoded request before it reaches the engine; nullopt: go ahead.
  std::optional<Failure> Refusal(Session& s, const protocol::Request& request);
  void CloseIdleSessions();
  void ReplyGranted(SessionId sid, const nlohmann::json& request_id, const std::string& resource,
                    const Grant& grant);
  void ReplyFailure(SessionId id, const nlohmann::json& request_id, std::string_view op,
                    const Failure& failure);

  RequestObserver* observer_;

  uv_loop_t* loop_;
  ServerOptions options_;
  LockEngine* engine_ = nullptr;
  uv_pipe_t* listener_ = nullptr;
  bool listening_ = false;
  SessionId next_session_ = 1;
  std::unordered_map<SessionId, std::unique_ptr<Session>> sessions_;
  size_t paused_sessions_ = 0;
  Timer idle_timer_;
  Timer accept_timer_;  // accepts the pending connection on the next loop iteration
};

}  // namespace lw
