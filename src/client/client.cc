#include "client/client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lw::client {
namespace {

using SteadyClock = std::chrono::steady_clock;

int RemainingMs(SteadyClock::time_point deadline) {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

}  // namespace

Client::Client(const std::string& socket_path) {
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof addr.sun_path) {
    throw ClientError("socket path too long: " + socket_path);
  }
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw ClientError(std::string("socket: ") + std::strerror(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    close(fd_);
    fd_ = -1;
    throw ClientError("cannot connect to the lockwarden agent at " + socket_path + ": " +
                      std::strerror(err) +
                      (err == ENOENT || err == ECONNREFUSED ? " (is `lockwarden serve` running?)"
                                                            : ""));
  }
}

Client::~Client() { Close(); }

Client::Client(Client&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      next_id_(other.next_id_),
      inbuf_(std::move(other.inbuf_)),
      pending_(std::move(other.pending_)) {}

Client& Client::operator=(Client&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    next_id_ = other.next_id_;
    inbuf_ = std::move(other.inbuf_);
    pending_ = std::move(other.pending_);
  }
  return *this;
}

void Client::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void Client::SendRaw(const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw ClientError(std::string("write to agent failed: ") + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
  }
}

std::optional<std::string> Client::ReadLine(Ms timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  for (;;) {
    const auto nl = inbuf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = inbuf_.substr(0, nl);
      inbuf_.erase(0, nl + 1);
      return line;
    }
    pollfd p{fd_, POLLIN, 0};
    const int rc = poll(&p, 1, RemainingMs(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) throw ClientError(std::string("poll: ") + std::strerror(errno));
    if (rc == 0) return std::nullopt;
    char buf[65536];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ClientError(std::string("read from agent failed: ") + std::strerror(errno));
    if (n == 0) throw ClientError("the agent closed the connection");
    inbuf_.append(buf, static_cast<size_t>(n));
  }
}

std::optional<nlohmann::json> Client::ReadMessage(Ms timeout) {
  auto line = ReadLine(timeout);
  if (!line) return std::nullopt;
  auto msg = nlohmann::json::parse(*line, nullptr, /*allow_exceptions=*/false);
  if (msg.is_discarded()) throw ClientError("the agent sent a line that is not JSON: " + *line);
  return msg;
}

nlohmann::json Client::Call(nlohmann::json request, Ms timeout) {
  if (!request.contains("id")) request["id"] = next_id_++;
  const nlohmann::json id = request["id"];
  SendRaw(request.dump() + "\n");
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->contains("id") && (*it)["id"] == id) {
      auto msg = std::move(*it);
      pending_.erase(it);
      return msg;
    }
  }
  const auto deadline = SteadyClock::now() + timeout;
  for (;;) {
    auto msg = ReadMessage(std::chrono::milliseconds(RemainingMs(deadline)));
    if (!msg) throw ClientError("no reply from the agent within " +
                                std::to_string(timeout.count()) + " ms");
    if (msg->contains("id") && (*msg)["id"] == id) return std::move(*msg);
    pending_.push_back(std::move(*msg));
  }
}

std::optional<nlohmann::json> Client::NextEvent(Ms timeout) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->contains("event")) {
      auto msg = std::move(*it);
      pending_.erase(it);
      return msg;
    }
  }
  const auto deadline = SteadyClock::now() + timeout;
  for (;;) {
    auto msg = ReadMessage(std::chrono::milliseconds(RemainingMs(deadline)));
    if (!msg) return std::nullopt;
    if (msg->contains("event")) return msg;
    pending_.push_back(std::move(*msg));
  }
}

nlohmann::json Client::Acquire(const std::string& resource, int64_t ttl_ms, int64_t wait_ms,
                               bool renew, Ms timeout, bool fence) {
  return Acquire(resource, ttl_ms, wait_ms, HoldKind{}, renew, timeout, fence);
}

namespace {

// An acquire request without its "resource" or "resources".
nlohmann::json AcquireFields(int64_t ttl_ms, int64_t wait_ms, Client::HoldKind kind, bool renew,
                              bool fence) {
  nlohmann::json request = {{"op", "acquire"}, {"wait_ms", wait_ms}, {"renew", renew}};
  if (ttl_ms > 0) request["ttl_ms"] = ttl_ms;
  if (fence) request["fence"] = true;
  if (kind.permits > 0) request["permits"] = kind.permits;
  if (kind.shared) request["shared"] = true;
  return request;
}

}  // namespace

nlohmann::json Client::Acquire(const std::string& resource, int64_t ttl_ms, int64_t wait_ms,
                               HoldKind kind, bool renew, Ms timeout, bool fence) {
  nlohmann::json request = AcquireFields(ttl_ms, wait_ms, kind, renew, fence);
  request["resource"] = resource;
  return Call(std::move(request), timeout);
}

nlohmann::json Client::AcquireAll(const std::vector<std::string>& resources, int64_t ttl_ms,
                                  int64_t wait_ms, HoldKind kind, bool renew, Ms timeout,
                                  bool fence) {
  nlohmann::json request = AcquireFields(ttl_ms, wait_ms, kind, renew, fence);
  request["resources"] = resources;
  return Call(std::move(request), timeout);
}

nlohmann::json Client::Resume(const std::string& resource, const std::string& token,
                              int64_t ttl_ms, bool renew, HoldKind kind, int permit,
                              int64_t fence, Ms timeout) {
  nlohmann::json request = {
      {"op", "resume"}, {"resource", resource}, {"token", token}, {"renew", renew}};
  if (ttl_ms > 0) request["ttl_ms"] = ttl_ms;
  if (kind.permits > 0) request["permits"] = kind.permits;
  if (permit >= 0) request["permit"] = permit;
  if (kind.shared) request["shared"] = true;
  if (kind.election) request["election"] = true;
  if (fence > 0) request["fence"] = fence;
  return Call(std::move(request), timeout);
}

nlohmann::json Client::Release(const std::string& resource, const std::string& token) {
  return Call({{"op", "release"}, {"resource", resource}, {"token", token}});
}

nlohmann::json Client::Extend(const std::string& resource, const std::string& token,
                              int64_t ttl_ms) {
  return Call({{"op", "extend"}, {"resource", resource}, {"token", token}, {"ttl_ms", ttl_ms}});
}

nlohmann::json Client::Campaign(const std::string& name, const std::string& value,
                                int64_t ttl_ms, int64_t wait_ms, Ms timeout) {
  nlohmann::json request = {{"op", "campaign"}, {"name", name}, {"value", value}};
  if (ttl_ms > 0) request["ttl_ms"] = ttl_ms;
  if (wait_ms >= 0) request["wait_ms"] = wait_ms;
  return Call(std::move(request), timeout);
}

nlohmann::json Client::Resign(const std::string& name, const std::string& token) {
  return Call({{"op", "resign"}, {"name", name}, {"token", token}});
}

nlohmann::json Client::Leader(const std::string& name) {
  return Call({{"op", "leader"}, {"name", name}});
}
nlohmann::json Client::Observe(const std::string& name) {
  return Call({{"op", "observe"}, {"name", name}});
}
nlohmann::json Client::Unobserve(const std::string& name) {
  return Call({{"op", "unobserve"}, {"name", name}});
}

nlohmann::json Client::Held() { return Call({{"op", "held"}}); }
nlohmann::json Client::Health() { return Call({{"op", "health"}}); }
nlohmann::json Client::Ping() { return Call({{"op", "ping"}}); }

}  // namespace lw::client
