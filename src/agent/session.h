#pragma once
// Session: one client connection on the Unix socket. Splits the byte stream into lines
// (at most max_line bytes each), writes replies in order, and records the peer's
// credentials. The Server owns sessions; a session tells it when its input ends (the peer
// shut down its writing side) and when it is fully closed.

#include <sys/types.h>
#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/session_id.h"

namespace lw {

// The raw bytes of /proc/PID/cmdline (arguments separated by NULs) as one printable line:
// NULs become spaces, other control bytes '?', cut to max_bytes (ending in "…" when cut).
std::string PrintableCmdline(std::string_view raw, size_t max_bytes);

class Session {
 public:
  struct Callbacks {
    std::function<void(Session&, std::string_view line)> on_line;
    std::function<void(Session&, size_t bytes)> on_line_too_long;  // the line is dropped
    std::function<void(Session&)> on_closed;  // after the handle is closed; may delete *this
    // Reading stopped (true) because unsent replies exceed max_unsent, or resumed (false).
    std::function<void(Session&, bool paused)> on_backpressure;
    // The peer sent end of input: nothing more is read, and bytes after its last '\n' (not a
    // request) are dropped. The session stays open for replies until Finish or Close.
    std::function<void(Session&)> on_input_ended;
  };

  // max_unsent: unsent reply bytes above which the session is not read from until they drain
  // to half of it (0: no bound).
  Session(uv_loop_t* loop, SessionId id, size_t max_line, size_t max_unsent, Callbacks callbacks);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Accepts the pending connection from `listener` and starts reading. False on failure
  // (the session then closes itself).
  bool Accept(uv_stream_t* listener);
  // Serves a connected socket handed over by the previous process (agent/upgrade.h), with the
  // bytes of a partial line it had read; owns fd from now on. False on failure (closing).
  bool Open(int fd, std::string input);
  // The connection's descriptor (-1 if none), and the bytes of a partial line read so far.
  int fd() const;
  const std::string& partial_input() const { return inbuf_; }
  // While held, nothing more is read (the bytes wait in the socket); replies are still sent.
  void Hold(bool held);

  // Queues one complete line for the client. Dropped once the session is closing.
  void Send(std::string line);
  // Starts closing at once, dropping unsent replies (idempotent, also during Finish).
  // on_closed follows from the event loop.
  void Close();
  // Closes once every queued reply is written (at once if none is); nothing more is sent.
  void Finish();
  // The peer closed its end entirely (not only its writing side): nobody reads replies any more.
  bool PeerGone() const;

  SessionId id() const { return id_; }
  bool closing() const { return closing_; }
  bool input_ended() const { return input_ended_; }
  pid_t peer_pid() const { return pid_; }
  uid_t peer_uid() const { return uid_; }
  gid_t peer_gid() const { return gid_; }
  // The peer's supplementary groups at connect time (SO_PEERGROUPS; empty if unknown).
  const std::vector<gid_t>& peer_groups() const { return groups_; }
  // The peer's command line when it connected ("" if unknown), at most 512 bytes.
  const std::string& peer_cmdline() const { return cmdline_; }
  // Its ancestors' pids when it connected, nearest first (Peer::ancestors).
  const std::vector<int>& peer_ancestors() const { return ancestors_; }
  size_t queued_bytes() const { return queued_bytes_; }
  bool paused() const { return paused_; }
  // When the peer last sent a byte (or connected).
  std::chrono::steady_clock::time_point last_input() const { return last_input_; }

  // The server handed this session to its handler (it was within max_connections); only
  // such a session's close is reported to the handler.
  bool accepted() const { return accepted_; }
  void MarkAccepted() { accepted_ = true; }

 private:
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  void Consume(const char* data, size_t len);
  void EndInput();
  void CloseHandle();
  void StartReading();
  void UpdateBackpressure();
  void ReadPeer();  // SO_PEERCRED, the peer's groups, command line and ancestors

  uv_pipe_t pipe_;
  SessionId id_;
  size_t max_line_;
  size_t max_unsent_;
  Callbacks callbacks_;
  std::string inbuf_;
  bool discarding_ = false;  // inside an over-long line: drop bytes until '\n'
  bool closing_ = false;       // Close or Finish was called: nothing more is sent
  bool input_ended_ = false;   // the peer sent end of input
  uv_shutdown_t shutdown_req_;  // Finish's, while replies are still being written
  pid_t pid_ = -1;
  uid_t uid_ = static_cast<uid_t>(-1);
  gid_t gid_ = static_cast<gid_t>(-1);
  std::vector<gid_t> groups_;
  std::string cmdline_;
  std::vector<int> ancestors_;
  size_t queued_bytes_ = 0;
  bool paused_ = false;
  bool held_ = false;
  bool accepted_ = false;
  std::chrono::steady_clock::time_point last_input_ = std::chrono::steady_clock::now();
};

}  // namespace lw
