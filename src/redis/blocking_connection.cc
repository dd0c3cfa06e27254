#include "redis/blocking_connection.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cstdlib>

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

// The socket has timeouts (SO_RCVTIMEO/SO_SNDTIMEO): a stream that wants more I/O ran out of time.
std::string TlsOutcome(TlsStream::Io io, const TlsStream& tls, const char* doing) {
  if (io == TlsStream::Io::kWantRead || io == TlsStream::Io::kWantWrite) {
    return std::string("timed out ") + doing;
  }
  return tls.failure().message;
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
  std::unique_ptr<BlockingConnection> conn(new BlockingConnection(c));
  if (address.tls.enabled) {
    redisSetTimeout(c, ToTimeval(connect_timeout));  // the handshake's deadline
    auto stream = TlsStream::Open(c->fd, address);
    if (auto* failed = std::get_if<TlsFailure>(&stream)) {
      return address.Display() + ": " + failed->message;
    }
    conn->tls_ = std::move(std::get<std::unique_ptr<TlsStream>>(stream));
    const TlsStream::Io io = conn->tls_->Handshake();
    if (io != TlsStream::Io::kDone) {
      return address.Display() + ": " +
             TlsOutcome(io, *conn->tls_, "during the TLS handshake (a plain-text port?)");
    }
  }
  redisSetTimeout(c, ToTimeval(command_timeout));
  if (const Command auth = AuthCommand(address); !auth.empty()) {
    auto reply = conn->Run(auth);
    if (auto* error = std::get_if<std::string>(&reply)) return address.Display() + ": " + *error;
    if (std::get<Reply>(reply).kind == Reply::Kind::kError) {
      return address.Display() + ": " + AuthFailed(std::get<Reply>(reply).text);
    }
  }
  return conn;
}

BlockingConnection::~BlockingConnection() {
  tls_.reset();  // before the socket closes
  redisFree(context_);
}

std::optional<std::string> BlockingConnection::Send(const std::vector<Command>& commands) {
  for (const Command& command : commands) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& arg : command) {
      argv.push_back(arg.data());
      lens.push_back(arg.size());
    }
    if (!tls_) {
      if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()), argv.data(),
                                 lens.data()) != REDIS_OK) {
        return ContextError(context_);
      }
      continue;
    }
    char* formatted = nullptr;
    const int len = redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), argv.data(),
                                           lens.data());
    if (len < 0) return std::string("out of memory");
    size_t done = 0;
    TlsStream::Io io = TlsStream::Io::kDone;
    while (done < static_cast<size_t>(len) && io == TlsStream::Io::kDone) {
      size_t n = 0;
      io = tls_->Write(formatted + done, static_cast<size_t>(len) - done, n);
      done += n;
    }
    redisFreeCommand(formatted);
    if (io != TlsStream::Io::kDone) return broken_ = TlsOutcome(io, *tls_, "writing");
  }
  return std::nullopt;
}

std::variant<Reply, std::string> BlockingConnection::Receive() {
  void* raw = nullptr;
  if (!tls_) {
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
      return ContextError(context_);
    }
  } else {
    char buf[16 * 1024];
    while (raw == nullptr) {
      if (redisReaderGetReply(context_->reader, &raw) != REDIS_OK) {
        return broken_ = "protocol error in the master's reply";
      }
      if (raw != nullptr) break;
      size_t n = 0;
      const TlsStream::Io io = tls_->Read(buf, sizeof buf, n);
      if (io != TlsStream::Io::kDone) return broken_ = TlsOutcome(io, *tls_, "reading");
      redisReaderFeed(context_->reader, buf, n);
    }
  }
  auto* reply = static_cast<redisReply*>(raw);
  Reply out = ReadReply(reply);
  freeReplyObject(reply);
  return out;
}

std::variant<std::vector<Reply>, std::string> BlockingConnection::Pipeline(
    const std::vector<Command>& commands) {
  if (context_->err) return ContextError(context_);
  if (!broken_.empty()) return broken_;
  if (auto error = Send(commands)) return *error;
  std::vector<Reply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    auto reply = Receive();
    if (auto* error = std::get_if<std::string>(&reply)) return *error;
    replies.push_back(std::move(std::get<Reply>(reply)));
  }
  return replies;
}

std::variant<Reply, std::string> BlockingConnection::Run(const Command& command) {
  auto replies = Pipeline({command});
  if (auto* error = std::get_if<std::string>(&replies)) return *error;
  return std::move(std::get<std::vector<Reply>>(replies).front());
}

}  // namespace lw
