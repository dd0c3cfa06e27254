#pragma once
// Blocking messages with file descriptors over a connected AF_UNIX stream socket (SCM_RIGHTS):
// what an in-place upgrade hands between the two processes (agent/upgrade.h). A message is a
// header (payload length, descriptor count: 4 bytes each, big-endian), the payload, then the
// descriptors, at most kFdsPerChunk per one-byte chunk. Received descriptors are close-on-exec.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace lw::handover {

inline constexpr size_t kFdsPerChunk = 250;  // below the kernel's SCM_MAX_FD (253)

struct Message {
  std::string payload;
  std::vector<int> fds;  // owned by the receiver
};

// Sends payload and fds (which stay open here); why not, on failure.
std::optional<std::string> SendMessage(int sock, std::string_view payload,
                                       const std::vector<int>& fds = {});
// Receives one message within timeout_ms (< 0: no bound); why not on failure (the peer closed,
// timed out, malformed). Descriptors received before a failure are closed.
std::variant<Message, std::string> ReceiveMessage(int sock, int64_t timeout_ms);

}  // namespace lw::handover
