#pragma once
// BlockingConnection: one blocking hiredis connection to a master with connect and command
// timeouts, for threads that may wait (the leak scanner, the presence probe, one-shot admin
// actions), never the event loop. Each such thread opens its own. A rediss:// address is
// spoken to over TLS (redis/tls.h): hiredis formats the commands and parses the replies, the
// stream carries the bytes.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/master_address.h"
#include "redis/reply.h"
#include "redis/tls.h"

struct redisContext;

namespace lw {

using Command = std::vector<std::string>;

class BlockingConnection {
 public:
  // Connects (TLS handshake for rediss://, then AUTH when the address has a password, as every
  // connection does: redis/connect_policy.h). Returns a human error, prefixed with the
  // master's host:port, on failure.
  static std::variant<std::unique_ptr<BlockingConnection>, std::string> Open(
      const MasterAddress& address, std::chrono::milliseconds connect_timeout,
      std::chrono::milliseconds command_timeout);
  ~BlockingConnection();
  BlockingConnection(const BlockingConnection&) = delete;
  BlockingConnection& operator=(const BlockingConnection&) = delete;

  // Sends every command at once, then reads the replies in order. An error reply is a reply;
  // an I/O error or timeout returns a human error and leaves the connection unusable.
  std::variant<std::vector<Reply>, std::string> Pipeline(const std::vector<Command>& commands);
  std::variant<Reply, std::string> Run(const Command& command);

 private:
  explicit BlockingConnection(redisContext* context) : context_(context) {}
  std::optional<std::string> Send(const std::vector<Command>& commands);
  std::variant<Reply, std::string> Receive();
  redisContext* context_;
  std::unique_ptr<TlsStream> tls_;  // rediss://: the socket's bytes go through it
  std::string broken_;              // why a TLS connection is unusable ("" while it is fine)
};

}  // namespace lw
