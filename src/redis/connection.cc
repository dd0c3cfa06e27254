#include "redis/connection.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <vector>

#include "redis/reply.h"
#include "redis/uv_adapter.h"

namespace lw {

Connection::Connection(uv_loop_t* loop, const MasterAddress& address, Options options,
                       Listener& listener)
    : loop_(loop),
      address_(address),
      options_(std::move(options)),
      listener_(listener),
      backoff_(options_.reconnect_max_backoff_ms),
      deadline_(loop),
      retry_(loop) {}

Connection::~Connection() {
  StopTimers();
  Close();
}

Connection* Connection::Of(const redisAsyncContext* ac) {
  auto* self = static_cast<Connection*>(ac->data);
  return self != nullptr && self->ac_ == ac ? self : nullptr;
}

std::optional<std::string> Connection::Open() {
  std::string error;
  ac_ = ConnectOnLoop(loop_, address_.host, address_.port, this, OnConnect, OnDisconnect, &error);
  if (ac_ == nullptr) return error;
  deadline_.Start(options_.connect_timeout_ms, [this] {
    Drop(options_.opening + " within " + std::to_string(options_.connect_timeout_ms) + " ms");
  });
  return std::nullopt;
}

void Connection::Established() {
  deadline_.Stop();
  backoff_.Reset();
}

void Connection::StopTimers() {
  deadline_.Stop();
  retry_.Stop();
}

void Connection::RetryIn(int64_t delay_ms, std::function<void()> attempt) {
  retry_.Start(delay_ms, std::move(attempt));
}

void Connection::Close() {
  if (ac_ == nullptr) return;
  redisAsyncContext* ac = ac_;
  ac_ = nullptr;
  ac->data = nullptr;  // its callbacks, now or when hiredis gets to free it, find no owner
  redisAsyncFree(ac);
}

void Connection::Drop(const std::string& why) {
  if (ac_ == nullptr) return;
  Close();
  Lose(why, /*refused=*/false);
}

void Connection::Lose(const std::string& why, bool refused) {
  deadline_.Stop();
  listener_.Lost(why, refused);
}

void Connection::OnConnect(const redisAsyncContext* ac, int status) {
  Connection* self = Of(ac);
  if (self == nullptr) return;
  if (status != REDIS_OK) {
    // hiredis frees the context after this callback returns.
    self->ac_ = nullptr;
    self->Lose(ac->errstr ? ac->errstr : "connect failed", /*refused=*/false);
    return;
  }
  if (self->options_.keepalive) redisEnableKeepAlive(&self->ac_->c);
  const std::vector<std::string> auth = AuthCommand(self->address_);
  if (auth.empty()) {
    self->listener_.Opened();
    return;
  }
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& word : auth) {
    argv.push_back(word.c_str());
    lens.push_back(word.size());
  }
  // Not freed from here on failure (hiredis still uses the context after this callback
  // returns): the deadline ends a connection whose AUTH was not even sent.
  redisAsyncCommandArgv(self->ac_, OnAuth, nullptr, static_cast<int>(argv.size()), argv.data(),
                        lens.data());
}

void Connection::OnAuth(redisAsyncContext* ac, void* reply, void* /*privdata*/) {
  Connection* self = Of(ac);
  // No reply: the connection is going away; its disconnect callback (if any) reports it.
  if (self == nullptr || reply == nullptr) return;
  const Reply r = ReadReply(static_cast<const redisReply*>(reply));
  if (r.kind == Reply::Kind::kError) return self->Drop(AuthFailed(r.text));
  self->listener_.Opened();
}

void Connection::OnDisconnect(const redisAsyncContext* ac, int /*status*/) {
  Connection* self = Of(ac);
  if (self == nullptr) return;  // a context we already dropped
  self->ac_ = nullptr;
  // REDIS_ERR_OTHER: the server answered an error nobody waited for (a refused SUBSCRIBE).
  self->Lose(ac->err ? ac->errstr : "connection closed by the server",
             /*refused=*/ac->err == REDIS_ERR_OTHER);
}

}  // namespace lw
