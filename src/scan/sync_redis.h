#pragma once
// SyncRedis: one blocking hiredis connection with connect and command timeouts, for the
// scanner thread and one-shot admin actions (never the event loop).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "config/config.h"

struct redisContext;

namespace lw {

struct SyncReply {
  enum class Kind { kStatus, kString, kInteger, kNil, kArray, kError };
  Kind kind = Kind::kNil;
  int64_t integer = 0;
  std::string text;
  std::vector<SyncReply> elements;
};

using Command = std::vector<std::string>;

class SyncRedis {
 public:
  // Connects (and AUTHs when the address has a password). Returns a human error on failure.
  static std::variant<std::unique_ptr<SyncRedis>, std::string> Open(
      const MasterAddress& address, std::chrono::milliseconds connect_timeout,
      std::chrono::milliseconds command_timeout);
  ~SyncRedis();
  SyncRedis(const SyncRedis&) = delete;
  SyncRedis& operator=(const SyncRedis&) = delete;

  // Sends every command at once, then reads the replies in order. An error reply is a reply;
  // an I/O error or timeout returns a human error and leaves the connection unusable.
  std::variant<std::vector<SyncReply>, std::string> Pipeline(const std::vector<Command>& commands);
  std::variant<SyncReply, std::string> Run(const Command& command);

 private:
  explicit SyncRedis(redisContext* context) : context_(context) {}
  redisContext* context_;
};

}  // namespace lw
