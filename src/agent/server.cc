#include "agent/server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "protocol/messages.h"

namespace lw {
namespace {

namespace fs = std::filesystem;

// How often a half-closed session waiting for answers is checked for a client that closed its
// socket entirely since (then its locks are released at once, not after the answers).
constexpr int64_t kGoneCheckMs = 500;

// True if something accepts connections on the socket at `path` (a live agent).
bool SomeoneListens(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  const bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return live;
}

std::optional<std::string> Chown(const std::string& path, const SocketAccess& access) {
  if (access.owner < 0 && access.group < 0) return std::nullopt;
  if (chown(path.c_str(), static_cast<uid_t>(access.owner), static_cast<gid_t>(access.group)) !=
      0) {
    return "cannot give " + path + " to uid " + std::to_string(access.owner) + " gid " +
           std::to_string(access.group) + ": " + std::strerror(errno);
  }
  return std::nullopt;
}

std::optional<std::string> PrepareSocketPath(const std::string& path,
                                             const SocketAccess& access) {
  const fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return "cannot create socket directory " + dir.string() + ": " + ec.message();
    // Only a directory we created is ours to set up; an existing one is the operator's.
    chmod(dir.c_str(), 0750);
    if (auto problem = Chown(dir.string(), access)) return problem;
  }
  struct stat st{};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return path + " exists and is not a socket; refusing to replace it";
    if (SomeoneListens(path)) {
      return "another agent is already listening on " + path + "; stop it or use --socket";
    }
    if (unlink(path.c_str()) != 0) {
      return "cannot remove stale socket " + path + ": " + std::strerror(errno);
    }
    spdlog::info("removed stale socket {}", path);
  }
  return std::nullopt;
}

}  // namespace

Server::Server(uv_loop_t* loop, ServerOptions options, RequestStats& stats)
    : loop_(loop),
      options_(std::move(options)),
      stats_(stats),
      idle_timer_(loop),
      accept_timer_(loop),
      ended_check_(loop),
      gone_timer_(loop) {}

Server::~Server() {
  if (listener_ != nullptr && !uv_is_closing(reinterpret_cast<uv_handle_t*>(listener_))) {
    uv_close(reinterpret_cast<uv_handle_t*>(listener_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_pipe_t*>(h); });
  }
}

std::optional<std::string> Server::Listen(SessionHandler& handler) {
  handler_ = &handler;
  const SocketAccess& access = options_.socket_access;
  if (auto problem = PrepareSocketPath(options_.socket_path, access)) return problem;
  listener_ = new uv_pipe_t;
  uv_pipe_init(loop_, listener_, 0);
  listener_->data = this;
  // Nobody but the owner can open the file between bind and chmod (the process is still
  // single-threaded as far as file creation goes).
  const mode_t old_umask = umask(0177);
  int rc = uv_pipe_bind(listener_, options_.socket_path.c_str());
  umask(old_umask);
  if (rc == 0) {
    if (chmod(options_.socket_path.c_str(), access.mode) != 0) {
      return "cannot chmod " + options_.socket_path + ": " + std::strerror(errno);
    }
    if (auto problem = Chown(options_.socket_path, access)) return problem;
    return StartListening();
  }
  return "cannot listen on " + options_.socket_path + ": " + uv_strerror(rc);
}

std::optional<std::string> Server::StartListening() {
  // Connections are accepted one per loop iteration (below), more slowly than a thousand
  // clients starting at once connect: the backlog holds every connection allowed, so that none
  // of them is refused with EAGAIN (the kernel caps it at net.core.somaxconn).
  const size_t allowed = options_.limits.max_connections;
  const int backlog =
      static_cast<int>(std::clamp<size_t>(allowed == 0 ? 4096 : allowed, 511, 65535));
  const int rc =
      uv_listen(reinterpret_cast<uv_stream_t*>(listener_), backlog, [](uv_stream_t* l, int status) {
        // Not accepted here: libuv would call again at once for the next pending connection,
        // and a connect storm would keep the loop in this callback forever. Left unaccepted,
        // the listener pauses until the accept at the start of the next loop iteration, after
        // every other ready socket was served: one connection per iteration, fairly.
        if (status == 0) static_cast<Server*>(l->data)->accept_timer_.Start(0, [l] {
          static_cast<Server*>(l->data)->OnConnection();
        });
      });
  if (rc != 0) {
    return "cannot listen on " + options_.socket_path + ": " + uv_strerror(rc);
  }
  listening_ = true;
  if (options_.limits.idle_timeout_ms > 0) {
    const int64_t period =
        std::clamp<int64_t>(options_.limits.idle_timeout_ms / 4, 100, 5'000);
    idle_timer_.StartRepeat(period, [this] { CloseIdleSessions(); });
  }
  return std::nullopt;
}

std::optional<std::string> Server::AdoptListener(int fd, SessionHandler& handler) {
  handler_ = &handler;
  listener_ = new uv_pipe_t;
  uv_pipe_init(loop_, listener_, 0);
  listener_->data = this;
  if (const int rc = uv_pipe_open(listener_, fd); rc != 0) {
    return "cannot serve the handed listening socket: " + std::string(uv_strerror(rc));
  }
  return StartListening();
}

SessionId Server::AdoptSession(int fd, std::string input, SessionId id) {
  if (id == 0 || sessions_.count(id) != 0) id = next_session_;
  next_session_ = std::max(next_session_, id + 1);
  auto session = std::make_unique<Session>(loop_, id, options_.limits.max_line_bytes,
                                           options_.limits.max_unsent_bytes, CallbacksFor());
  Session* raw = session.get();
  sessions_.emplace(id, std::move(session));
  if (!raw->Open(fd, std::move(input))) return 0;
  raw->MarkAccepted();
  Opened(*raw);
  return id;
}

void Server::Hold(bool held) {
  held_ = held;
  for (auto& [id, s] : sessions_) s->Hold(held);
  if (!held) ScheduleCheckEnded();
}

bool Server::Flushed() const {
  for (const auto& [id, s] : sessions_) {
    // A closing session's locks are released when it is closed: not handed over.
    if (s->queued_bytes() > 0 || s->closing()) return false;
  }
  return true;
}

int Server::ListenerFd() const {
  uv_os_fd_t fd = -1;
  if (listener_ != nullptr) uv_fileno(reinterpret_cast<const uv_handle_t*>(listener_), &fd);
  return fd;
}

std::vector<Server::Handed> Server::HandOver() {
  if (accept_timer_.active()) {
    accept_timer_.Stop();
    OnConnection();
  }
  std::vector<Handed> out;
  for (auto& [id, s] : sessions_) {
    if (s->closing() || !s->accepted()) continue;
    out.push_back({id, s->fd(), s->partial_input()});
  }
  return out;
}

void Server::CloseIdleSessions() {
  const auto now = std::chrono::steady_clock::now();
  const auto idle = std::chrono::milliseconds(options_.limits.idle_timeout_ms);
  for (auto& [id, s] : sessions_) {
    if (s->closing() || now - s->last_input() < idle || !handler_->Idle(id)) continue;
    spdlog::debug("session {} closed: idle for {} ms", id, options_.limits.idle_timeout_ms);
    stats_.limit_refusals[Limit::kIdleTimeout].Inc();
    s->Close();
  }
}

void Server::Abandon() {
  if (!listening_) return;
  listening_ = false;
  idle_timer_.Stop();
  accept_timer_.Stop();
  // libuv unlinks the path a pipe was bound to when the handle closes: not ours to remove.
  free(const_cast<char*>(listener_->pipe_fname));
  listener_->pipe_fname = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(listener_),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_pipe_t*>(h); });
  listener_ = nullptr;
}

void Server::StopListening() {
  const bool was = listening_;
  Abandon();
  if (was) unlink(options_.socket_path.c_str());
}

void Server::CloseSessions() {
  for (auto& [id, s] : sessions_) s->Close();
}

Session::Callbacks Server::CallbacksFor() {
  Session::Callbacks cb;
  cb.on_line = [this](Session& s, std::string_view line) { handler_->Line(s.id(), line); };
  cb.on_line_too_long = [this](Session& s, size_t bytes) {
    stats_.Received("request");
    stats_.Failed("request", ErrorCode::kBadRequest);
    stats_.limit_refusals[Limit::kLineLength].Inc();
    s.Send(protocol::EncodeError(nullptr, ErrorCode::kBadRequest,
                                 "line of " + std::to_string(bytes) + "+ bytes exceeds the " +
                                     std::to_string(options_.limits.max_line_bytes) +
                                     "-byte limit; it was dropped"));
  };
  cb.on_backpressure = [this](Session&, bool paused) {
    if (paused) {
      stats_.sessions_paused.Inc();
    } else {
      stats_.sessions_paused.Dec();
    }
  };
  cb.on_input_ended = [this](Session& s) { InputEnded(s); };
  cb.on_closed = [this](Session& s) {
    const SessionId sid = s.id();
    spdlog::debug("session {} closed", sid);
    if (ended_.erase(sid) > 0 && ended_.empty()) gone_timer_.Stop();
    if (s.paused()) stats_.sessions_paused.Dec();
    if (s.accepted()) handler_->Closed(sid);
    sessions_.erase(sid);  // destroys s
  };
  return cb;
}

void Server::OnConnection() {
  if (!listening_) return;
  const SessionId id = next_session_++;
  const size_t max_connections = options_.limits.max_connections;
  const bool over = max_connections > 0 && sessions_.size() >= max_connections;
  auto session = std::make_unique<Session>(loop_, id, options_.limits.max_line_bytes,
                                           options_.limits.max_unsent_bytes, CallbacksFor());
  Session* raw = session.get();
  sessions_.emplace(id, std::move(session));
  if (!raw->Accept(reinterpret_cast<uv_stream_t*>(listener_))) return;
  if (over) {
    // Accepted only to say why: the peer gets one line, then the connection closes; the
    // handler never hears of it.
    stats_.limit_refusals[Limit::kConnections].Inc();
    raw->Send(protocol::EncodeError(nullptr, ErrorCode::kTooMany,
                                    std::to_string(max_connections) +
                                        " connections are open (max_connections); this one is "
                                        "closed. Retry later or reuse a connection"));
    raw->Close();
    return;
  }
  raw->MarkAccepted();
  if (held_) raw->Hold(true);
  Opened(*raw);
}

void Server::Opened(Session& s) {
  spdlog::debug("session {} opened by pid {} uid {}", s.id(), s.peer_pid(), s.peer_uid());
  handler_->Opened(s.id(),
                   Peer{static_cast<int>(s.peer_pid()), static_cast<int>(s.peer_uid()),
                        static_cast<int>(s.peer_gid()), s.peer_cmdline(), s.peer_ancestors()},
                   s.peer_groups());
}

void Server::InputEnded(Session& s) {
  if (!s.accepted() || s.PeerGone()) {
    spdlog::debug("session {} closed by its client", s.id());
    s.Close();
    return;
  }
  spdlog::debug("session {}: end of input; it ends once its requests are answered", s.id());
  ended_.insert(s.id());
  if (!gone_timer_.active()) gone_timer_.StartRepeat(kGoneCheckMs, [this] { CheckEnded(); });
  ScheduleCheckEnded();
}

void Server::ScheduleCheckEnded() {
  if (!ended_.empty()) ended_check_.Start(0, [this] { CheckEnded(); });
}

void Server::CheckEnded() {
  for (auto it = ended_.begin(); !held_ && !muted_ && it != ended_.end();) {
    Session& s = *sessions_.at(*it);
    if (s.PeerGone()) {
      spdlog::debug("session {} closed by its client before its answers", s.id());
      s.Close();
    } else if (handler_->Answered(s.id())) {
      spdlog::debug("session {} answered after its end of input: ending it", s.id());
      s.Finish();
    }
    it = s.closing() ? ended_.erase(it) : std::next(it);
  }
  if (ended_.empty()) gone_timer_.Stop();  // a repeating timer keeps the loop running
}

void Server::Mute(bool muted) {
  muted_ = muted;
  if (muted) return;
  ScheduleCheckEnded();
  auto lines = std::move(muted_lines_);
  muted_lines_.clear();
  for (auto& [session, queued] : lines) {
    for (auto& line : queued) Send(session, std::move(line));
  }
}

void Server::Send(SessionId session, std::string line) {
  if (muted_) {
    muted_lines_[session].push_back(std::move(line));
    return;
  }
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  it->second->Send(std::move(line));
  if (ended_.contains(session)) ScheduleCheckEnded();
}

}  // namespace lw
