#include "agent/server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
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

std::optional<std::string> PrepareSocketPath(const std::string& path) {
  const fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return "cannot create socket directory " + dir.string() + ": " + ec.message();
    chmod(dir.c_str(), 0750);
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
      options_(std::move(options)) {}

Server::~Server() {
  if (listener_ != nullptr && !uv_is_closing(reinterpret_cast<uv_handle_t*>(listener_))) {
    uv_close(reinterpret_cast<uv_handle_t*>(listener_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_pipe_t*>(h); });
  }
}

std::optional<std::string> Server::Listen() {
  if (auto problem = PrepareSocketPath(options_.socket_path)) return problem;
  listener_ = new uv_pipe_t;
  uv_pipe_init(loop_, listener_, 0);
  listener_->data = this;
  int rc = uv_pipe_bind(listener_, options_.socket_path.c_str());
  if (rc == 0) {
    // Owner and group may connect; others may not (the directory is 0750 too).
    chmod(options_.socket_path.c_str(), 0660);
    rc = uv_listen(reinterpret_cast<uv_stream_t*>(listener_), 511, [](uv_stream_t* l, int status) {
      if (status == 0) static_cast<Server*>(l->data)->OnConnection();
    });
  }
  if (rc != 0) {
    return "cannot listen on " + options_.socket_path + ": " + uv_strerror(rc);
  }
  listening_ = true;
  return std::nullopt;
}

void Server::StopListening() {
  if (!listening_) return;
  listening_ = false;
  uv_close(reinterpret_cast<uv_handle_t*>(listener_),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_pipe_t*>(h); });
  listener_ = nullptr;
  unlink(options_.socket_path.c_str());
}

void Server::CloseSessions() {
  for (auto& [id, s] : sessions_) s->Close();
}

void Server::OnConnection() {
  const SessionId id = next_session_++;
  Session::Callbacks cb;
  cb.on_line = [this](Session& s, std::string_view line) { OnLine(s, line); };
  cb.on_line_too_long = [this](Session& s, size_t bytes) {
    observer_->Received("request");
    observer_->Failed("request", ErrorCode::kBadRequest);
    s.Send(protocol::EncodeError(nullptr, ErrorCode::kBadRequest,
                                 "line of " + std::to_string(bytes) + "+ bytes exceeds the " +
                                     std::to_string(options_.max_line_bytes) +
                                     "-byte limit; it was dropped"));
  };
  cb.on_closed = [this](Session& s) {
    const SessionId sid = s.id();
    spdlog::debug("session {} closed", sid);
    if (engine_ != nullptr) engine_->CloseSession(sid);
    sessions_.erase(sid);  // destroys s
  };
  auto session = std::make_unique<Session>(loop_, id, options_.max_line_bytes, std::move(cb));
  Session* raw = session.get();
  sessions_.emplace(id, std::move(session));
  if (raw->Accept(reinterpret_cast<uv_stream_t*>(listener_))) {
    spdlog::debug("session {} opened by pid {} uid {}", id, raw->peer_pid(), raw->peer_uid());
  }
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
  observer_->Received(protocol::OpName(request.op));
  Dispatch(s, std::move(request));
}

Server::Peer Server::PeerOf(SessionId id) const {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return {};
  const Session& s = *it->second;
  return {static_cast<int>(s.peer_pid()), static_cast<int>(s.peer_uid()), s.peer_cmdline()};
}

void Server::ReplyFailure(SessionId sid, const nlohmann::json& request_id, std::string_view op,
                          const Failure& failure) {
  observer_->Failed(op, failure.code);
  Reply(sid, protocol::EncodeError(request_id, failure.code, failure.message));
}

void Server::ReplyGranted(SessionId sid, const nlohmann::json& request_id,
                          const std::string& resource, const Grant& grant) {
  // Validity is re-checked as the reply is written, never trusted from when it was decided:
  // a grant whose validity ran out in between is given back and reported as a failure.
  const auto left = grant.valid_until - Clock::now();
  const int64_t validity_ms = std::chrono::floor<std::chrono::milliseconds>(left).count();
  if (validity_ms <= 0) {
    engine_->Release(sid, resource, grant.token, [](const std::optional<Failure>&) {});
    ReplyFailure(sid, request_id, "acquire",
                 Failure{ErrorCode::kNoQuorum, "the lock was won but its validity ran out before "
                                               "the reply could be written; it was released"});
    return;
  }
  Reply(sid, protocol::EncodeAcquired(request_id, resource, grant.token, validity_ms,
                                      grant.waited_ms, grant.fence));
}

void Server::Reply(SessionId id, std::string line) {
  auto it = sessions_.find(id);
  if (it != sessions_.end()) it->second->Send(std::move(line));
}

void Server::NotifyLost(SessionId session, const std::string& resource, const std::string& token,
                        std::string_view reason) {
  Reply(session, protocol::EncodeLost(resource, token, reason));
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
                  ReplyFailure(sid, id, "acquire", std::get<Failure>(result));
                }
              },
              op.fence);
        } else if constexpr (std::is_same_v<T, protocol::ReleaseRequest>) {
          engine_->Release(sid, op.resource, op.token,
                           [this, sid, id](const std::optional<Failure>& f) {
                             if (f) {
                               ReplyFailure(sid, id, "release", *f);
                             } else {
                               Reply(sid, protocol::EncodeOk(id));
                             }
                           });
        } else if constexpr (std::is_same_v<T, protocol::ExtendRequest>) {
          engine_->Extend(sid, op.resource, op.token, op.ttl_ms,
                          [this, sid, id](const auto& result) {
                            if (auto* e = std::get_if<Extension>(&result)) {
                              Reply(sid, protocol::EncodeExtended(id, e->validity_ms));
                            } else {
                              ReplyFailure(sid, id, "extend", std::get<Failure>(result));
                            }
                          });
        } else if constexpr (std::is_same_v<T, protocol::HeldRequest>) {
          std::vector<protocol::HeldLockView> locks;
          for (auto& h : engine_->HeldBy(sid)) {
            locks.push_back({h.resource, h.token, h.validity_ms, h.renew});
          }
          s.Send(protocol::EncodeHeld(id, locks));
        } else if constexpr (std::is_same_v<T, protocol::HealthRequest>) {
          std::vector<protocol::NodeHealthView> nodes;
          for (auto& n : engine_->NodeStatuses()) {
            nodes.push_back({n.addr, n.up, n.rtt_ms, n.quarantined,
                             n.quarantine_left_ms.value_or(0), n.quarantine_reason});
          }
          s.Send(protocol::EncodeHealth(id, engine_->quorum(), nodes));
        } else if constexpr (std::is_same_v<T, protocol::LocksRequest>) {
          std::vector<protocol::AgentLockView> locks;
          for (auto& l : engine_->AllLocks()) {
            const Peer peer = PeerOf(l.session);
            locks.push_back({l.resource, l.session, peer.pid, peer.uid, l.held_ms, l.validity_ms,
                             l.renew, l.waiters});
          }
          s.Send(protocol::EncodeLocks(id, locks));
        } else {
          s.Send(protocol::EncodeOk(id));
        }
      },
      request.op);
}

}  // namespace lw
