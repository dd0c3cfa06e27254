#include "agent/fd_passing.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace lw::handover {
namespace {

using Clock = std::chrono::steady_clock;

std::string Errno(std::string_view what) { return std::string(what) + ": " + std::strerror(errno); }

// Waits until sock is readable; false when the deadline passed (or poll failed).
bool WaitReadable(int sock, Clock::time_point deadline, bool bounded) {
  for (;;) {
    int wait = -1;
    if (bounded) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      wait = static_cast<int>(left.count());
    }
    pollfd p{sock, POLLIN, 0};
    const int n = poll(&p, 1, wait);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

constexpr int kSendStallMs = 10'000;  // the peer reads nothing for this long: give up

// The socket may be non-blocking (the old process polls it on its loop): a full buffer waits
// until the peer reads. False when it read nothing for kSendStallMs.
bool WaitWritable(int sock) {
  pollfd p{sock, POLLOUT, 0};
  for (;;) {
    const int n = poll(&p, 1, kSendStallMs);
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

std::optional<std::string> SendAll(int sock, const char* data, size_t len) {
  while (len > 0) {
    const ssize_t n = send(sock, data, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if ((errno == EAGAIN || errno == EWOULDBLOCK) && WaitWritable(sock)) continue;
      return Errno("send");
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
  return std::nullopt;
}

// A one-byte message with room for `count` descriptors beside it.
struct ChunkBuffer {
  explicit ChunkBuffer(size_t count) : control(CMSG_SPACE(sizeof(int) * count)) {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
  }
  char byte = 'F';
  iovec iov{&byte, 1};
  std::vector<char> control;
  msghdr msg{};
};

std::optional<std::string> SendChunk(int sock, const int* fds, size_t count) {
  ChunkBuffer chunk(count);
  msghdr& msg = chunk.msg;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * count);
  std::memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
  for (;;) {
    if (sendmsg(sock, &msg, MSG_NOSIGNAL) == 1) return std::nullopt;
    if (errno == EINTR) continue;
    if ((errno == EAGAIN || errno == EWOULDBLOCK) && WaitWritable(sock)) continue;
    return Errno("sendmsg");
  }
}

void PutU32(char* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
}

uint32_t GetU32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

class Reader {
 public:
  Reader(int sock, int64_t timeout_ms)
      : sock_(sock),
        bounded_(timeout_ms >= 0),
        deadline_(Clock::now() + std::chrono::milliseconds(bounded_ ? timeout_ms : 0)) {}

  std::optional<std::string> Bytes(char* out, size_t len) {
    while (len > 0) {
      if (!WaitReadable(sock_, deadline_, bounded_)) return "timed out";
      const ssize_t n = recv(sock_, out, len, 0);
      if (n == 0) return "the other process closed the channel";
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        return Errno("recv");
      }
      out += n;
      len -= static_cast<size_t>(n);
    }
    return std::nullopt;
  }

  std::optional<std::string> Chunk(std::vector<int>& fds, size_t count) {
    if (!WaitReadable(sock_, deadline_, bounded_)) return "timed out";
    ChunkBuffer chunk(count);
    chunk.byte = 0;
    msghdr& msg = chunk.msg;
    ssize_t n;
    do {
      n = recvmsg(sock_, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Chunk(fds, count);
    if (n < 0) return Errno("recvmsg");
    if (n == 0) return "the other process closed the channel";
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t got = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      const size_t at = fds.size();
      fds.resize(at + got);
      std::memcpy(fds.data() + at, CMSG_DATA(c), got * sizeof(int));
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0 || chunk.byte != 'F') return "a malformed descriptor chunk";
    return std::nullopt;
  }

 private:
  int sock_;
  bool bounded_;
  Clock::time_point deadline_;
};

}  // namespace

std::optional<std::string> SendMessage(int sock, std::string_view payload,
                                       const std::vector<int>& fds) {
  char header[8];
  PutU32(header, static_cast<uint32_t>(payload.size()));
  PutU32(header + 4, static_cast<uint32_t>(fds.size()));
  if (auto e = SendAll(sock, header, sizeof header)) return e;
  if (auto e = SendAll(sock, payload.data(), payload.size())) return e;
  for (size_t at = 0; at < fds.size(); at += kFdsPerChunk) {
    if (auto e = SendChunk(sock, fds.data() + at, std::min(kFdsPerChunk, fds.size() - at))) {
      return e;
    }
  }
  return std::nullopt;
}

std::variant<Message, std::string> ReceiveMessage(int sock, int64_t timeout_ms) {
  Reader reader(sock, timeout_ms);
  char header[8];
  if (auto e = reader.Bytes(header, sizeof header)) return *e;
  Message m;
  m.payload.resize(GetU32(header));
  const size_t count = GetU32(header + 4);
  if (auto e = reader.Bytes(m.payload.data(), m.payload.size())) return *e;
  while (m.fds.size() < count) {
    if (auto e = reader.Chunk(m.fds, std::min(kFdsPerChunk, count - m.fds.size()))) {
      for (int fd : m.fds) close(fd);
      return *e;
    }
  }
  return m;
}

}  // namespace lw::handover
