#pragma once
// Server: the Unix-socket transport of the agent. Listens, accepts, splits each session's bytes
// into lines and writes lines back, enforcing the connection-level limits (connections, line
// length, idle time, unsent bytes). It knows nothing of locks: every complete line goes to the
// SessionHandler it serves (LockService), which answers through Send. Loop thread only.
//
// End of input: a client that shuts down its writing side (shutdown(SHUT_WR), what socat and
// `nc -U` do at the end of their input) still gets the answer to every request it sent; its
// session ends once the handler says all are answered and the replies are written. A client
// that closes its socket entirely is gone: its session ends at once, and so does a half-closed
// one whose client closes it entirely later (checked every kGoneCheckMs).

#include <uv.h>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "agent/request_stats.h"
#include "agent/session.h"
#include "core/defaults.h"
#include "core/lock_view.h"
#include "redis/timer.h"

namespace lw {

// What the transport hands to the service behind it (loop thread).
class SessionHandler {
 public:
  virtual ~SessionHandler() = default;
  // A session was accepted (within max_connections); `peer` is who connected.
  virtual void Opened(SessionId session, const Peer& peer, const std::vector<gid_t>& groups) = 0;
  // One complete line (without '\n') of the session.
  virtual void Line(SessionId session, std::string_view line) = 0;
  // The session is closed: nothing more will be sent to it or read from it.
  virtual void Closed(SessionId session) = 0;
  // False while the session holds or awaits something, or has a request unanswered: the idle
  // sweep leaves such a session open however quiet it is.
  virtual bool Idle(SessionId session) const = 0;
  // Every request the session sent has been answered. A session whose input ended (the client
  // shut down its writing side) ends once this holds and its replies are written.
  virtual bool Answered(SessionId session) const = 0;
};

// Where the service's lines for a session go (the transport; loop thread).
class SessionWriter {
 public:
  virtual ~SessionWriter() = default;
  // Queues one complete line for the session; dropped if it is gone or closing.
  virtual void Send(SessionId session, std::string line) = 0;
};

// Bounds on what one client can make the transport hold (0: no bound).
struct TransportLimits {
  size_t max_connections = 0;
  int64_t idle_timeout_ms = 0;
  size_t max_unsent_bytes = 0;
  size_t max_line_bytes = kDefaultMaxLineBytes;
};

// Who owns the socket file and who may open it.
struct SocketAccess {
  unsigned mode = 0660;
  int owner = -1;  // uid; -1: the agent's
  int group = -1;  // gid; -1: the agent's
};

struct ServerOptions {
  std::string socket_path;
  TransportLimits limits;
  SocketAccess socket_access;
};

class Server final : public SessionWriter {
 public:
  // stats: not owned, must outlive the server.
  Server(uv_loop_t* loop, ServerOptions options, RequestStats& stats);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Creates the socket (replacing a stale file, never a live agent's) and serves every session
  // to `handler` (not owned; must outlive the sessions). Returns a human error on failure.
  std::optional<std::string> Listen(SessionHandler& handler);

  void Send(SessionId session, std::string line) override;

  // Stops accepting and removes the socket file; sessions stay open so that in-flight
  // requests still get their (shutting_down) replies. CloseSessions ends them.
  void StopListening();
  // The same without removing the socket file: another process serves it now.
  void Abandon();
  void CloseSessions();
  size_t session_count() const { return sessions_.size(); }

  // ---- an in-place upgrade (agent/upgrade.h)
  // Held: no session is read from (their bytes wait in the kernel) and new connections are
  // accepted but not read; replies are still written. Release(false) undoes it.
  void Hold(bool held);
  // Every reply written to its socket (nothing queued in any session).
  bool Flushed() const;
  // While muted, lines for the sessions are kept here, not written (their sockets are the new
  // process's until it says whether it took over); Mute(false) writes them, Discard drops them.
  void Mute(bool muted);
  void DiscardMuted() { muted_lines_.clear(); }
  // The listening socket and every session's (id, descriptor, partial line), after accepting
  // a connection libuv has taken from the kernel but not handed to us yet.
  struct Handed {
    SessionId id;
    int fd;
    std::string input;
  };
  int ListenerFd() const;
  std::vector<Handed> HandOver();
  // Serves a listening socket handed over by the previous process (instead of Listen).
  std::optional<std::string> AdoptListener(int fd, SessionHandler& handler);
  // Serves one handed connection as a new session (the handler hears Opened); 0 on failure.
  // id: the session's id in the previous process, kept (0: a new one; later ones come after).
  SessionId AdoptSession(int fd, std::string input, SessionId id = 0);

 private:
  void OnConnection();
  void CloseIdleSessions();
  // The session's input ended: it ends now if its client is gone, else once answered.
  void InputEnded(Session& s);
  // Ends the sessions of ended_ that are answered (on the next loop turn; not while held or
  // muted: an upgrade may still hand them over, and their requests may be asked again).
  void CheckEnded();
  void ScheduleCheckEnded();
  // Listens on listener_ (bound), starts the idle sweep.
  std::optional<std::string> StartListening();
  // The handler hears of an accepted session.
  void Opened(Session& s);
  Session::Callbacks CallbacksFor();

  uv_loop_t* loop_;
  ServerOptions options_;
  RequestStats& stats_;
  SessionHandler* handler_ = nullptr;
  uv_pipe_t* listener_ = nullptr;
  bool listening_ = false;
  bool held_ = false;
  bool muted_ = false;
  std::unordered_map<SessionId, std::vector<std::string>> muted_lines_;
  SessionId next_session_ = 1;
  std::unordered_map<SessionId, std::unique_ptr<Session>> sessions_;
  Timer idle_timer_;
  Timer accept_timer_;  // accepts the pending connection on the next loop iteration
  std::unordered_set<SessionId> ended_;  // sessions whose input ended, not closing yet
  Timer ended_check_;   // CheckEnded on the next loop iteration
  Timer gone_timer_;    // CheckEnded every kGoneCheckMs while ended_ is not empty
};

}  // namespace lw
