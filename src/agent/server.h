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
#include "locking/lock_engine.h"
#include "protocol/messages.h"

namespace lw {

// What the server reports to metrics, on the loop thread. op: as on the wire, or "request"
// when the line named no known op.
class RequestObserver {
 public:
  virtual ~RequestObserver() = default;
  virtual void Received(std::string_view /*op*/) {}
  virtual void Failed(std::string_view /*op*/, ErrorCode /*code*/) {}
};

struct ServerOptions {
  std::string socket_path;
  size_t max_line_bytes = 65'536;
  protocol::Limits limits;
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
  // Who is at the other end of a session (SO_PEERCRED and /proc at connect time).
  struct Peer {
    int pid = -1;  // -1: the session is gone
    int uid = -1;
    std::string cmdline;
  };
  Peer PeerOf(SessionId id) const;

 private:
  void OnConnection();
  void OnLine(Session& s, std::string_view line);
  void Dispatch(Session& s, protocol::Request request);
  void Reply(SessionId id, std::string line);
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
};

}  // namespace lw
