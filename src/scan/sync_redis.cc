#include "scan/sync_redis.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

namespace lw {
namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

SyncReply Convert(const redisReply* r) {
  SyncReply out;
  switch (r->type) {
    case REDIS_REPLY_STATUS:
      out.kind = SyncReply::Kind::kStatus;
      break;
    case REDIS_REPLY_STRING:
      out.kind = SyncReply::Kind::kString;
      break;
    case REDIS_REPLY_INTEGER:
      out.kind = SyncReply::Kind::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.kind = SyncReply::Kind::kArray;
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(Convert(r->element[i]));
      break;
    case REDIS_REPLY_ERROR:
      out.kind = SyncReply::Kind::kError;
      break;
    default:
      out.kind = SyncReply::Kind::kNil;
      break;
  }
  if (r->str != nullptr) out.text.assign(r->str, r->len);
  return out;
}

std::string ContextError(const redisContext* c) {
  return c->errstr[0] != '\0' ? std::string(c->errstr) : "connection error";
}

}  // namespace

std::variant<std::unique_ptr<SyncRedis>, std::string> SyncRedis::Open(
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
  std::unique_ptr<SyncRedis> conn(new SyncRedis(c));
  if (!address.password.empty()) {
    Command auth = address.user.empty() ? Command{"AUTH", address.password}
                                        : Command{"AUTH", address.user, address.password};
    auto reply = conn->Run(auth);
    if (auto* error = std::get_if<std::string>(&reply)) return address.Display() + ": " + *error;
    if (std::get<SyncReply>(reply).kind == SyncReply::Kind::kError) {
      // Never echo the command: it carries the password.
      return address.Display() + ": AUTH failed: " + std::get<SyncReply>(reply).text;
    }
  }
  return conn;
}

SyncRedis::~SyncRedis() { redisFree(context_); }

std::variant<std::vector<SyncReply>, std::string> SyncRedis::Pipeline(
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
  std::vector<SyncReply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
      return ContextError(context_);
    }
    auto* reply = static_cast<redisReply*>(raw);
    replies.push_back(Convert(reply));
    freeReplyObject(reply);
  }
  return replies;
}

std::variant<SyncReply, std::string> SyncRedis::Run(const Command& command) {
  auto replies = Pipeline({command});
  if (auto* error = std::get_if<std::string>(&replies)) return *error;
  return std::move(std::get<std::vector<SyncReply>>(replies).front());
}

}  // namespace lw
