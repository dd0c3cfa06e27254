#pragma once
// TLS to a master (rediss://) over a socket hiredis connected. OpenSSL speaks the protocol;
// this file keeps the client contexts and says what went wrong in words an operator can act on.
//
// Contexts: one per distinct set of files and verify flag, shared by every connection and
// thread. Each TlsStream::Open (one per connection attempt) checks the files' identity (inode,
// size, mtime); when one changed, the context is built again from the files, so a renewed CA or
// client certificate is used from the next connection on, with no restart. A file that cannot be
// loaded fails that attempt (the previous context is not kept: a broken renewal is reported, not
// hidden until the next restart).
//
// Verification (TlsOptions::verify, the default): the chain must lead to a CA in ca_file (or the
// system's store), and the leaf must name server_name, or the master's host (a DNS name or an
// IP address, checked as such). SNI carries a DNS name. TLS 1.2 is the lowest version offered.

#include <cstddef>
#include <memory>
#include <string>
#include <variant>

#include "core/master_address.h"
#include "redis/connect_policy.h"

struct ssl_st;

namespace lw {

struct TlsFailure {
  ConnectFailure kind = ConnectFailure::kTlsOther;
  std::string message;  // for people; names what to check
};

// One client TLS session on a connected socket. Non-blocking sockets get kWantRead/kWantWrite;
// on a blocking socket with SO_RCVTIMEO/SO_SNDTIMEO, those mean the timeout passed.
class TlsStream {
 public:
  enum class Io { kDone, kWantRead, kWantWrite, kClosed, kFailed };

  static std::variant<std::unique_ptr<TlsStream>, TlsFailure> Open(int fd,
                                                                   const MasterAddress& address);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  Io Handshake();
  // Up to cap bytes into buf (n: how many) when kDone.
  Io Read(char* buf, size_t cap, size_t& n);
  // Some of data (n: how many) when kDone. After kWantWrite, call again with the same len (the
  // bytes may have moved).
  Io Write(const char* data, size_t len, size_t& n);
  // After kFailed or kClosed: what went wrong.
  const TlsFailure& failure() const { return failure_; }

 private:
  TlsStream(ssl_st* ssl, std::string name) : ssl_(ssl), name_(std::move(name)) {}
  Io Outcome(int ret, bool handshake);

  ssl_st* ssl_;
  std::string name_;  // the name the certificate must carry
  TlsFailure failure_;
};

}  // namespace lw
