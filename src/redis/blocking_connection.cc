#include "redis/blocking_connection.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include "redis/connect_policy.h"

namespace lw {
namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

std::string ContextError(const redisContext* c) {
  return c->errstr[0] != '\0' ? std::string(c->errstr) : "connection error";
}

}  // namespace

std::variant<std::unique_ptr<BlockingConnection>, std::string> BlockingConnection::Open(
    const MasterAddress& address, std::chrono::milliseconds connect_timeout,
    std::chrono::milliseconds command_timeout) {
  redisContext* c = redisConnectWithTimeout(address.host.c_str(), address.port,
                                            ToTimeval(connect_timeout));
  if (c == nullptr) return std::string("out of memory");
  if (c->err) {
    std::string error = ContextError(c);
    redisFree(c);
    return address.Display() + ": " + error;
  }
  redisSetTimeout(c, ToTimeval(command_timeout));
  std::unique_ptr<BlockingConnection> conn(new BlockingConnection(c));
  if (const Command auth = AuthCommand(address); !auth.empty()) {
    auto reply = conn->Run(auth);
    if (auto* error = std::get_if<std::string>(&reply)) return address.Display() + ": " + *error;
    if (std::get<Reply>(reply).kind == Reply::Kind::kError) {
      return address.Display() + ": " + AuthFailed(std::get<Reply>(reply).text);
    }
  }
  return conn;
}

BlockingConnection::~BlockingConnection() { redisFree(context_); }

std::variant<std::vector<Reply>, std::string> BlockingConnection::Pipeline(
    const std::vector<Command>& commands) {
  if (context_->err) return ContextError(context_);
  for (const Command& command : commands) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& arg : command) {
      argv.push_back(arg.data());
      lens.push_back(arg.size());
    }
    if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()), argv.data(),
                               lens.data()) != REDIS_OK) {
      return ContextError(context_);
    }
  }
  std::vector<Reply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
      return ContextError(context_);
    }
    auto* reply = static_cast<redisReply*>(raw);
    replies.push_back(ReadReply(reply));
    freeReplyObject(reply);
  }
  return replies;
}

std::variant<Reply, std::string> BlockingConnection::Run(const Command& command) {
  auto replies = Pipeline({command});
  if (auto* error = std::get_if<std::string>(&replies)) return *error;
  return std::move(std::get<std::vector<Reply>>(replies).front());
}

}  // namespace lw
