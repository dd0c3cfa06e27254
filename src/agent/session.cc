#include "agent/session.h"

#include "core/hold.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace lw {
namespace {

struct WriteRequest {
  uv_write_t req;
  std::string data;
  Session* session;
};

// The loop is single-threaded and every read is consumed before the next one starts, so
// one buffer serves all sessions.
char g_read_buffer[64 * 1024];

constexpr size_t kMaxCmdline = 512;

// Read once per connection on the loop thread: /proc is in memory and the read is bounded.
std::string ReadCmdline(pid_t pid) {
  if (pid <= 0) return "";
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/cmdline", static_cast<int>(pid));
  std::FILE* f = std::fopen(path, "rb");
  if (f == nullptr) return "";
  char raw[kMaxCmdline + 1];
  const size_t n = std::fread(raw, 1, sizeof raw, f);
  std::fclose(f);
  return PrintableCmdline(std::string_view(raw, n), kMaxCmdline);
}

// The parent of `pid` (field 4 of /proc/PID/stat, after the command name in parentheses, which
// may itself hold parentheses); -1 if unknown.
int ParentOf(int pid) {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  std::FILE* f = std::fopen(path, "rb");
  if (f == nullptr) return -1;
  char raw[1024];
  const size_t n = std::fread(raw, 1, sizeof raw - 1, f);
  std::fclose(f);
  raw[n] = '\0';
  const char* close = std::strrchr(raw, ')');
  int ppid = -1;
  char state = 0;
  if (close == nullptr || std::sscanf(close + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

// pid's parent, grandparent... nearest first, up to (not including) init; bounded.
std::vector<int> ReadAncestors(pid_t pid) {
  std::vector<int> out;
  int at = static_cast<int>(pid);
  while (at > 1 && out.size() < kMaxAncestors) {
    at = ParentOf(at);
    if (at <= 1) break;
    out.push_back(at);
  }
  return out;
}

}  // namespace

std::string PrintableCmdline(std::string_view raw, size_t max_bytes) {
  while (!raw.empty() && raw.back() == '\0') raw.remove_suffix(1);
  const bool cut = raw.size() > max_bytes;
  if (cut) raw = raw.substr(0, max_bytes);
  std::string out;
  out.reserve(raw.size() + 3);
  for (unsigned char c : raw) {
    if (c == '\0') {
      out += ' ';
    } else if (c < 0x20 || c == 0x7f) {
      out += '?';
    } else {
      out += static_cast<char>(c);  // UTF-8 passes through; the JSON writer replaces invalid bytes
    }
  }
  if (cut) out += "\u2026";
  return out;
}

// The peer's supplementary groups (Linux 4.13+); empty when the kernel cannot tell.
std::vector<gid_t> PeerGroups(int fd) {
#ifdef SO_PEERGROUPS
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 2; ++attempt) {
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return groups;
    }
    if (errno != ERANGE) break;
    groups.resize(len / sizeof(gid_t) + 1);  // len now holds the size needed
  }
#else
  (void)fd;
#endif
  return {};
}

Session::Session(uv_loop_t* loop, SessionId id, size_t max_line, size_t max_unsent,
                 Callbacks callbacks)
    : id_(id), max_line_(max_line), max_unsent_(max_unsent), callbacks_(std::move(callbacks)) {
  uv_pipe_init(loop, &pipe_, 0);
  pipe_.data = this;
}

bool Session::Accept(uv_stream_t* listener) {
  auto* stream = reinterpret_cast<uv_stream_t*>(&pipe_);
  if (uv_accept(listener, stream) != 0) {
    Close();
    return false;
  }
  ReadPeer();
  StartReading();
  return true;
}

bool Session::Open(int fd, std::string input) {
  if (uv_pipe_open(&pipe_, fd) != 0) {
    close(fd);
    Close();
    return false;
  }
  inbuf_ = std::move(input);
  ReadPeer();
  StartReading();
  return true;
}

void Session::ReadPeer() {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(&pipe_), &fd) != 0) return;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
    pid_ = cred.pid;
    uid_ = cred.uid;
    gid_ = cred.gid;
    cmdline_ = ReadCmdline(pid_);
    ancestors_ = ReadAncestors(pid_);
  }
  groups_ = PeerGroups(fd);
}

int Session::fd() const {
  uv_os_fd_t fd = -1;
  uv_fileno(reinterpret_cast<const uv_handle_t*>(&pipe_), &fd);
  return fd;
}

void Session::Hold(bool held) {
  if (held_ == held || closing_) return;
  held_ = held;
  if (held) {
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&pipe_));
  } else if (!paused_) {
    StartReading();
  }
}

void Session::StartReading() {
  if (input_ended_) return;
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(&pipe_),
      [](uv_handle_t*, size_t, uv_buf_t* buf) {
        *buf = uv_buf_init(g_read_buffer, sizeof g_read_buffer);
      },
      OnRead);
}

// A session that does not read its replies is not read from either: its unsent bytes stay
// bounded by max_unsent plus what one read's worth of requests can produce.
void Session::UpdateBackpressure() {
  if (max_unsent_ == 0 || closing_) return;
  if (!paused_ && queued_bytes_ > max_unsent_) {
    paused_ = true;
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&pipe_));
    if (callbacks_.on_backpressure) callbacks_.on_backpressure(*this, true);
  } else if (paused_ && queued_bytes_ <= max_unsent_ / 2) {
    paused_ = false;
    if (!held_) StartReading();
    if (callbacks_.on_backpressure) callbacks_.on_backpressure(*this, false);
  }
}

void Session::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* self = static_cast<Session*>(stream->data);
  if (nread == UV_EOF) {
    self->EndInput();
    return;
  }
  if (nread < 0) {  // a read error: the client is gone
    self->Close();
    return;
  }
  if (nread > 0) {
    self->last_input_ = std::chrono::steady_clock::now();
    self->Consume(buf->base, static_cast<size_t>(nread));
  }
}

void Session::Consume(const char* data, size_t len) {
  size_t pos = 0;
  while (pos < len && !closing_) {
    const char* nl = static_cast<const char*>(memchr(data + pos, '\n', len - pos));
    const size_t chunk = (nl ? static_cast<size_t>(nl - data) : len) - pos;
    if (discarding_) {
      if (nl) discarding_ = false;
    } else if (inbuf_.size() + chunk > max_line_) {
      const size_t seen = inbuf_.size() + chunk;
      inbuf_.clear();
      inbuf_.shrink_to_fit();
      discarding_ = nl == nullptr;
      callbacks_.on_line_too_long(*this, seen);
    } else if (nl) {
      std::string_view line;
      if (inbuf_.empty()) {
        line = std::string_view(data + pos, chunk);  // common case: no copy
      } else {
        inbuf_.append(data + pos, chunk);
        line = inbuf_;
      }
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!line.empty()) callbacks_.on_line(*this, line);
      inbuf_.clear();
    } else {
      inbuf_.append(data + pos, chunk);
    }
    pos += chunk + (nl ? 1 : 0);
  }
}

void Session::EndInput() {
  if (input_ended_ || closing_) return;
  input_ended_ = true;
  uv_read_stop(reinterpret_cast<uv_stream_t*>(&pipe_));
  inbuf_.clear();
  inbuf_.shrink_to_fit();
  discarding_ = false;
  callbacks_.on_input_ended(*this);
}

bool Session::PeerGone() const {
  pollfd p{fd(), 0, 0};
  if (p.fd < 0) return true;
  // POLLHUP: both directions are shut, which for a Unix socket means the peer closed it.
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)) != 0;
}

void Session::Send(std::string line) {
  if (closing_) return;
  auto* stream = reinterpret_cast<uv_stream_t*>(&pipe_);
  if (queued_bytes_ == 0) {
    uv_buf_t buf = uv_buf_init(line.data(), static_cast<unsigned>(line.size()));
    const int n = uv_try_write(stream, &buf, 1);
    if (n == static_cast<int>(line.size())) return;
    if (n > 0) line.erase(0, static_cast<size_t>(n));
    else if (n != UV_EAGAIN) {
      Close();
      return;
    }
  }
  auto* w = new WriteRequest{{}, std::move(line), this};
  w->req.data = w;
  queued_bytes_ += w->data.size();
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  const int rc = uv_write(&w->req, stream, &buf, 1, [](uv_write_t* req, int status) {
    std::unique_ptr<WriteRequest> done(static_cast<WriteRequest*>(req->data));
    Session* s = done->session;
    s->queued_bytes_ -= done->data.size();
    if (status < 0 && status != UV_ECANCELED) {
      s->Close();
    } else {
      s->UpdateBackpressure();
    }
  });
  if (rc != 0) {
    queued_bytes_ -= w->data.size();
    delete w;
    Close();
    return;
  }
  UpdateBackpressure();
}

void Session::Close() {
  closing_ = true;
  CloseHandle();
}

void Session::Finish() {
  if (closing_) return;
  closing_ = true;
  if (queued_bytes_ > 0) {
    shutdown_req_.data = this;
    // Runs once the queued writes are done (or cancelled by a Close, before on_closed).
    const int rc = uv_shutdown(&shutdown_req_, reinterpret_cast<uv_stream_t*>(&pipe_),
                               [](uv_shutdown_t* req, int) {
                                 static_cast<Session*>(req->data)->CloseHandle();
                               });
    if (rc == 0) return;
  }
  CloseHandle();
}

void Session::CloseHandle() {
  auto* handle = reinterpret_cast<uv_handle_t*>(&pipe_);
  if (uv_is_closing(handle)) return;
  // Pending writes and a pending shutdown complete (with UV_ECANCELED) before the close
  // callback runs.
  uv_close(handle, [](uv_handle_t* h) {
    auto* self = static_cast<Session*>(h->data);
    self->callbacks_.on_closed(*self);
  });
}

}  // namespace lw
