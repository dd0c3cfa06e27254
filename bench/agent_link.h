#pragma once
// One connection to the agent's Unix socket on a libuv loop: newline-delimited JSON out and in,
// without a JSON library on the hot path (the agent writes compact replies with fixed field
// names; see docs/protocol.md). Many links share one loop and one thread, so the load generator
// spends microseconds, not threads, per request.

#include <uv.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace lw::bench {

// The fields of one agent line the benchmarks look at. Views point into the line.
struct AgentLine {
  bool is_event = false;  // {"event":...}: pushed, no id
  int64_t id = -1;        // -1: absent or not an integer
  bool ok = false;
  std::string_view token;  // acquire replies
  std::string_view error;  // failed replies: the code; events: the event name
};
AgentLine ParseAgentLine(std::string_view line);

class AgentLink {
 public:
  using OnConnected = std::function<void(int status)>;  // 0 or a libuv error code
  using OnLine = std::function<void(std::string_view line)>;
  using OnClosed = std::function<void()>;  // the agent closed the connection or it broke

  // Connects at once. The link must stay at this address until the loop has finished closing
  // it (Close, then uv_run until it returns).
  AgentLink(uv_loop_t* loop, const std::string& socket_path, OnConnected connected, OnLine line,
            OnClosed closed);
  AgentLink(const AgentLink&) = delete;
  AgentLink& operator=(const AgentLink&) = delete;

  // Queues one line; `line` must end with '\n'. Writes at once when the socket takes it.
  void Send(std::string_view line);
  void Close();
  bool open() const { return open_; }

 private:
  static void Alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf);
  static void Read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf);

  uv_pipe_t pipe_{};
  uv_connect_t connect_{};
  OnConnected connected_;
  OnLine line_;
  OnClosed closed_;
  std::string in_;  // bytes of an unfinished line
  char buf_[65536]{};
  bool open_ = false;
  bool closing_ = false;
};

}  // namespace lw::bench
