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
  stage_ = Stage::kConnecting;
  failure_ = ConnectFailure::kConnect;
  ac_ = ConnectOnLoop(loop_, address_.host, address_.port, this, OnConnect, OnDisconnect, &error);
  if (ac_ == nullptr) return error;
  if (address_.tls.enabled) {
    // Made now, on the connecting socket: a CA or key file that cannot be loaded fails here,
    // and a renewed one is read (redis/tls.h).
    auto stream = TlsStream::Open(ac_->c.fd, address_);
    if (auto* failed = std::get_if<TlsFailure>(&stream)) {
      failure_ = failed->kind;
      Close();
      return failed->message;
    }
    tls_ = std::move(std::get<std::unique_ptr<TlsStream>>(stream));
  }
  deadline_.Start(options_.connect_timeout_ms, [this] {
    const std::string within = " within " + std::to_string(options_.connect_timeout_ms) + " ms";
    if (stage_ == Stage::kTls) {
      return Drop("no TLS handshake" + within + "; if this is a plain-text Redis port, use redis://",
                  ConnectFailure::kTlsHandshakeTimeout);
    }
    Drop(options_.opening + within, ConnectFailure::kTimeout);
  });
  return std::nullopt;
}

void Connection::Established() {
  stage_ = Stage::kEstablished;
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
  tls_.reset();
  if (ac_ == nullptr) return;
  redisAsyncContext* ac = ac_;
  ac_ = nullptr;
  ac->data = nullptr;  // its callbacks, now or when hiredis gets to free it, find no owner
  redisAsyncFree(ac);
}

void Connection::Drop(const std::string& why, ConnectFailure kind) {
  if (ac_ == nullptr) return;
  Close();
  Lose(why, /*refused=*/false, kind);
}

void Connection::Lose(const std::string& why, bool refused, ConnectFailure kind) {
  deadline_.Stop();
  if (stage_ != Stage::kEstablished) failure_ = kind;
  listener_.Lost(why, refused);
}

void Connection::OnConnect(const redisAsyncContext* ac, int status) {
  Connection* self = Of(ac);
  if (self == nullptr) return;
  if (status != REDIS_OK) {
    // hiredis frees the context after this callback returns.
    self->ac_ = nullptr;
    self->tls_.reset();
    self->Lose(ac->errstr ? ac->errstr : "connect failed", /*refused=*/false,
               ConnectFailure::kConnect);
    return;
  }
  if (self->options_.keepalive) redisEnableKeepAlive(&self->ac_->c);
  if (self->tls_) {
    self->stage_ = Stage::kTls;
    StartTls(self->ac_, std::move(self->tls_), OnTls);
    return;
  }
  self->SendAuthOrOpen();
}

void Connection::OnTls(redisAsyncContext* ac, const TlsStream* failed) {
  Connection* self = Of(ac);
  if (self == nullptr) return;
  if (failed == nullptr) return self->SendAuthOrOpen();
  // A copy: dropping the context frees the stream.
  TlsFailure failure = failed->failure();
  if (self->stage_ != Stage::kEstablished && failure.kind == ConnectFailure::kClosed &&
      self->address_.tls.cert_file.empty()) {
    // A master with tls-auth-clients closes a session without a client certificate right after
    // the handshake; its alert saying so is often lost to the reset that follows.
    failure.message += " after the TLS handshake; if the master requires client certificates "
                       "(tls-auth-clients), set redis_tls_cert_file and redis_tls_key_file";
  }
  self->Drop(failure.message, failure.kind);
}

void Connection::SendAuthOrOpen() {
  const std::vector<std::string> auth = AuthCommand(address_);
  if (auth.empty()) {
    stage_ = Stage::kOwner;
    listener_.Opened();
    return;
  }
  stage_ = Stage::kAuth;
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& word : auth) {
    argv.push_back(word.c_str());
    lens.push_back(word.size());
  }
  // Not freed from here on failure (hiredis may still use the context after the connect
  // callback returns): the deadline ends a connection whose AUTH was not even sent.
  redisAsyncCommandArgv(ac_, OnAuth, nullptr, static_cast<int>(argv.size()), argv.data(),
                        lens.data());
}

void Connection::OnAuth(redisAsyncContext* ac, void* reply, void* /*privdata*/) {
  Connection* self = Of(ac);
  // No reply: the connection is going away; its disconnect callback (if any) reports it.
  if (self == nullptr || reply == nullptr) return;
  const Reply r = ReadReply(static_cast<const redisReply*>(reply));
  if (r.kind == Reply::Kind::kError) return self->Drop(AuthFailed(r.text), ConnectFailure::kAuth);
  self->stage_ = Stage::kOwner;
  self->listener_.Opened();
}

void Connection::OnDisconnect(const redisAsyncContext* ac, int /*status*/) {
  Connection* self = Of(ac);
  if (self == nullptr) return;  // a context we already dropped
  self->ac_ = nullptr;
  // REDIS_ERR_OTHER: the server answered an error nobody waited for (a refused SUBSCRIBE).
  std::string why = ac->err ? ac->errstr : "connection closed by the server";
  const bool refused = ac->err == REDIS_ERR_OTHER;
  if (!refused && self->stage_ != Stage::kEstablished && !self->address_.tls.enabled) {
    // A TLS-only port takes the TCP connection, then drops it at the first plain-text bytes.
    why += " before answering; if this is a TLS port, use rediss://";
  }
  self->Lose(why, refused, refused ? ConnectFailure::kHandshake : ConnectFailure::kClosed);
}

}  // namespace lw
