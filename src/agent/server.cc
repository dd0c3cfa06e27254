#include "agent/server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

namespace lw {
namespace {

namespace fs = std::filesystem;

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

namespace {
RequestObserver& SilentRequests() {
  static RequestObserver silent;
  return silent;
}
}  // namespace

Server::Server(uv_loop_t* loop, ServerOptions options)
    : observer_(options.observer ? options.observer : &SilentRequests()),
      loop_(loop),
      options_(std::move(options)),
      idle_timer_(loop),
      accept_timer_(loop) {}

Server::~Server() {
  if (listener_ != nullptr && !uv_is_closing(reinterpret_cast<uv_handle_t*>(listener_))) {
    uv_close(reinterpret_cast<uv_handle_t*>(listener_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_pipe_t*>(h); });
  }
}

std::optional<std::string> Server::Listen() {
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
    rc = uv_listen(reinterpret_cast<uv_stream_t*>(listener_), 511, [](uv_stream_t* l, int status) {
      // Not accepted here: libuv would call again at once for the next pending connection,
      // and a connect storm would keep the loop in this callback forever. Left unaccepted,
      // the listener pauses until the accept at the start of the next loop iteration, after
      // every other ready socket was served: one connection per iteration, fairly.
      if (status == 0) static_cast<Server*>(l->data)->accept_timer_.Start(0, [l] {
        static_cast<Server*>(l->data)->OnConnection();
      });
    });
  }
  if (rc != 0) {
    return "cannot listen on " + options_.socket_path + ": " + uv_strerror(rc);
  }
  listening_ = true;
  if (options_.client_limits.idle_timeout_ms > 0) {
    const int64_t period =
        std::clamp<int64_t>(options_.client_limits.idle_timeout_ms / 4, 100, 5'000);
    idle_timer_.StartRepeat(period, [this] { CloseIdleSessions(); });
  }
  return std::nullopt;
}

void Server::CloseIdleSessions() {
  const auto now = Clock::now();
  const auto idle = std::chrono::milliseconds(options_.client_limits.idle_timeout_ms);
  for (auto& [id, s] : sessions_) {
    if (s->closing() || s->inflight > 0 || now - s->last_input() < idle) continue;
    if (engine_ != nullptr && engine_->Commitments(id) > 0) continue;  // holds or awaits a lock
    spdlog::debug("session {} closed: idle for {} ms", id, options_.client_limits.idle_timeout_ms);
    observer_->LimitReached("idle_timeout");
    s->Close();
  }
}

void Server::StopListening() {
  if (!listening_) return;
  listening_ = false;
  idle_timer_.Stop();
  accept_timer_.Stop();
  uv_close(reinterpret_cast<uv_handle_t*>(listener_),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_pipe_t*>(h); });
  listener_ = nullptr;
  unlink(options_.socket_path.c_str());
}

void Server::CloseSessions() {
  for (auto& [id, s] : sessions_) s->Close();
}

void Server::OnConnection() {
  if (!listening_) return;
  const SessionId id = next_session_++;
  Session::Callbacks cb;
  cb.on_line = [this](Session& s, std::string_view line) { OnLine(s, line); };
  cb.on_line_too_long = [this](Session& s, size_t bytes) {
    observer_->Received("request");
    observer_->Failed("request", ErrorCode::kBadRequest);
    observer_->LimitReached("line_length");
    s.Send(protocol::EncodeError(nullptr, ErrorCode::kBadRequest,
                                 "line of " + std::to_string(bytes) + "+ bytes exceeds the " +
                                     std::to_string(options_.max_line_bytes) +
                                     "-byte limit; it was dropped"));
  };
  cb.on_backpressure = [this](Session&, bool paused) {
    paused_sessions_ += paused ? 1 : -1;
    observer_->Backpressure(paused);
  };
  cb.on_closed = [this](Session& s) {
    const SessionId sid = s.id();
    spdlog::debug("session {} closed", sid);
    if (s.paused()) {
      --paused_sessions_;
      observer_->Backpressure(false);
    }
    if (engine_ != nullptr) engine_->CloseSession(sid);
    sessions_.erase(sid);  // destroys s
  };
  const size_t max_connections = options_.client_limits.max_connections;
  const bool over = max_connections > 0 && sessions_.size() >= max_connections;
  auto session = std::make_unique<Session>(loop_, id, options_.max_line_bytes,
                                           options_.client_limits.max_unsent_bytes, std::move(cb));
  Session* raw = session.get();
  sessions_.emplace(id, std::move(session));
  if (!raw->Accept(reinterpret_cast<uv_stream_t*>(listener_))) return;
  if (over) {
    // Accepted only to say why: the peer gets one line, then the connection closes.
    observer_->LimitReached("connections");
    raw->Send(protocol::EncodeError(nullptr, ErrorCode::kTooMany,
                                    std::to_string(max_connections) +
                                        " connections are open (max_connections); this one is "
                                        "closed. Retry later or reuse a connection"));
    raw->Close();
    return;
  }
  spdlog::debug("session {} opened by pid {} uid {}", id, raw->peer_pid(), raw->peer_uid());
}

void Server::OnLine(Session& s, std::string_view line) {
  auto decoded = protocol::DecodeRequest(line, options_.limits);
  if (auto* err = std::get_if<protocol::DecodeError>(&decoded)) {
    const std::string_view op = err->op.empty() ? std::string_view("request") : err->op;
    observer_->Received(op);
    observer_->Failed(op, err->code);
    s.Send(protocol::EncodeError(err->id, err->code, err->message));
    return;
  }
  auto& request = std::get<protocol::Request>(decoded);
  const std::string_view op = protocol::OpName(request.op);
  observer_->Received(op);
  if (auto refusal = Refusal(s, request)) {
    observer_->Failed(op, refusal->code);
    s.Send(protocol::EncodeError(request.id, refusal->code, refusal->message));
    return;
  }
  ++s.inflight;
  Dispatch(s, std::move(request));
}

std::optional<Failure> Server::Refusal(Session& s, const protocol::Request& request) {
  const ClientLimits& limits = options_.client_limits;
  if (limits.max_inflight > 0 && s.inflight >= limits.max_inflight) {
    observer_->LimitReached("inflight");
    return Failure{ErrorCode::kTooMany,
                   std::to_string(s.inflight) +
                       " requests of this connection are still unanswered "
                       "(max_inflight_per_session); read the replies before sending more"};
  }
  const auto* acquire = std::get_if<protocol::AcquireRequest>(&request.op);
  if (acquire == nullptr) return std::nullopt;
  if (!options_.access.Allows({s.peer_uid(), s.peer_gid(), s.peer_groups()},
                              acquire->resource)) {
    observer_->AccessDenied();
    // One warning per session: a client retrying in a loop must not flood the log.
    if (!s.denied_logged) {
      s.denied_logged = true;
      spdlog::warn("access denied: pid {} uid {} gid {} may not lock {} (no access rule "
                   "allows it; further refusals of session {} are logged at debug)",
                   s.peer_pid(), s.peer_uid(), s.peer_gid(), nlohmann::json(acquire->resource).dump(),
                   s.id());
    } else {
      spdlog::debug("access denied: session {} may not lock {}", s.id(),
                    nlohmann::json(acquire->resource).dump());
    }
    return Failure{ErrorCode::kForbidden,
                   "uid " + std::to_string(s.peer_uid()) + " may not lock this resource: no "
                   "access rule of the agent allows it"};
  }
  if (limits.max_locks > 0 && engine_ != nullptr && engine_->Commitments(s.id()) >= limits.max_locks) {
    observer_->LimitReached("locks_per_session");
    return Failure{ErrorCode::kTooMany,
                   "this connection holds or awaits " + std::to_string(limits.max_locks) +
                       " locks (max_locks_per_session); release some first"};
  }
  return std::nullopt;
}

Server::Peer Server::PeerOf(SessionId id) const {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return {};
  const Session& s = *it->second;
  return {static_cast<int>(s.peer_pid()), static_cast<int>(s.peer_uid()),
          static_cast<int>(s.peer_gid()), s.peer_cmdline()};
}

void Server::ReplyFailure(SessionId sid, const nlohmann::json& request_id, std::string_view op,
                          const Failure& failure) {
  observer_->Failed(op, failure.code);
  Answer(sid, protocol::EncodeError(request_id, failure.code, failure.message));
}

void Server::ReplyGranted(SessionId sid, const nlohmann::json& request_id,
                          const std::string& resource, const Grant& grant) {
  Answer(sid, protocol::EncodeAcquired(request_id, resource, grant.token, grant.validity_ms,
                                      grant.waited_ms, grant.fence));
}

void Server::Answer(SessionId id, std::string line) {
  auto it = sessions_.find(id);
  if (it != sessions_.end()) Answer(*it->second, std::move(line));
}

void Server::Answer(Session& s, std::string line) {
  if (s.inflight > 0) --s.inflight;
  s.Send(std::move(line));
}

void Server::NotifyLost(SessionId session, const std::string& resource, const std::string& token,
                        std::string_view reason) {
  auto it = sessions_.find(session);
  if (it != sessions_.end()) it->second->Send(protocol::EncodeLost(resource, token, reason));
}

void Server::Dispatch(Session& s, protocol::Request request) {
  const SessionId sid = s.id();
  auto id = std::move(request.id);
  std::visit(
      [&](auto& op) {
        using T = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<T, protocol::AcquireRequest>) {
          engine_->Acquire(
              sid, op.resource, op.ttl_ms, op.wait_ms, op.renew,
              [this, sid, id, resource = op.resource](const auto& result) {
                if (auto* g = std::get_if<Grant>(&result)) {
                  ReplyGranted(sid, id, resource, *g);
                } else {
                  const Failure& f = std::get<Failure>(result);
                  if (f.code == ErrorCode::kTooMany) observer_->LimitReached("waiters_per_resource");
                  ReplyFailure(sid, id, "acquire", f);
                }
              },
              op.fence);
        } else if constexpr (std::is_same_v<T, protocol::ReleaseRequest>) {
          engine_->Release(sid, op.resource, op.token,
                           [this, sid, id](const std::optional<Failure>& f) {
                             if (f) {
                               ReplyFailure(sid, id, "release", *f);
                             } else {
                               Answer(sid, protocol::EncodeOk(id));
                             }
                           });
        } else if constexpr (std::is_same_v<T, protocol::ExtendRequest>) {
          engine_->Extend(sid, op.resource, op.token, op.ttl_ms,
                          [this, sid, id](const auto& result) {
                            if (auto* e = std::get_if<Extension>(&result)) {
                              Answer(sid, protocol::EncodeExtended(id, e->validity_ms));
                            } else {
                              ReplyFailure(sid, id, "extend", std::get<Failure>(result));
                            }
                          });
        } else if constexpr (std::is_same_v<T, protocol::HeldRequest>) {
          std::vector<protocol::HeldLockView> locks;
          for (auto& h : engine_->HeldBy(sid)) {
            locks.push_back({h.resource, h.token, h.validity_ms, h.renew});
          }
          Answer(s, protocol::EncodeHeld(id, locks));
        } else if constexpr (std::is_same_v<T, protocol::HealthRequest>) {
          std::vector<protocol::NodeHealthView> nodes;
          for (auto& n : engine_->NodeStatuses()) {
            nodes.push_back({n.addr, n.up, n.rtt_ms, n.quarantined,
                             n.quarantine_left_ms.value_or(0), n.quarantine_reason});
          }
          Answer(s, protocol::EncodeHealth(id, engine_->quorum(), nodes));
        } else if constexpr (std::is_same_v<T, protocol::LocksRequest>) {
          std::vector<protocol::AgentLockView> locks;
          for (auto& l : engine_->AllLocks()) {
            const Peer peer = PeerOf(l.session);
            locks.push_back({l.resource, l.session, peer.pid, peer.uid, l.held_ms, l.validity_ms,
                             l.renew, l.waiters});
          }
          Answer(s, protocol::EncodeLocks(id, locks));
        } else {
          Answer(s, protocol::EncodeOk(id));
        }
      },
      request.op);
}

}  // namespace lw
