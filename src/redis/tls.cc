#include "redis/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace lw {
namespace {

struct CtxFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
using CtxPtr = std::shared_ptr<SSL_CTX>;

// What identifies a file's content on disk: a rename or rewrite changes one of these.
using Stamp = std::tuple<dev_t, ino_t, off_t, int64_t, int64_t>;

Stamp StampOf(const std::string& path) {
  struct stat st {};
  if (path.empty() || stat(path.c_str(), &st) != 0) return {};
  return {st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
}

// The first error OpenSSL queued on this thread, as text, and the queue cleared.
std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown error";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

std::variant<CtxPtr, TlsFailure> BuildContext(const TlsOptions& o) {
  ERR_clear_error();
  CtxPtr ctx(SSL_CTX_new(TLS_client_method()), CtxFree{});
  auto fail = [](const std::string& what) {
    return TlsFailure{ConnectFailure::kTlsConfig, what + ": " + OpenSslError()};
  };
  if (!ctx) return fail("cannot create a TLS context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (o.verify) {
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    if (o.ca_file.empty()) {
      if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
        return fail("cannot load the system's CA store");
      }
    } else if (SSL_CTX_load_verify_locations(ctx.get(), o.ca_file.c_str(), nullptr) != 1) {
      return fail("redis_tls_ca_file " + o.ca_file + " cannot be loaded");
    }
  } else {
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  }
  if (!o.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), o.cert_file.c_str()) != 1) {
      return fail("redis_tls_cert_file " + o.cert_file + " cannot be loaded");
    }
    if (SSL_CTX_use_PrivateKey_file(ctx.get(), o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return fail("redis_tls_key_file " + o.key_file + " cannot be loaded");
    }
    if (SSL_CTX_check_private_key(ctx.get()) != 1) {
      return fail("redis_tls_key_file " + o.key_file + " is not the key of " + o.cert_file);
    }
  }
  return ctx;
}

// Contexts by files and verify flag, rebuilt when a file's stamp changed. Any thread.
class ContextCache {
 public:
  std::variant<CtxPtr, TlsFailure> For(const TlsOptions& o) {
    const Key key{o.ca_file, o.cert_file, o.key_file, o.verify};
    const Stamps stamps{StampOf(o.ca_file), StampOf(o.cert_file), StampOf(o.key_file)};
    std::lock_guard lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second.stamps == stamps) return it->second.ctx;
    auto built = BuildContext(o);
    if (auto* ctx = std::get_if<CtxPtr>(&built)) {
      entries_[key] = Entry{*ctx, stamps};
    } else {
      entries_.erase(key);
    }
    return built;
  }

 private:
  using Key = std::tuple<std::string, std::string, std::string, bool>;
  using Stamps = std::tuple<Stamp, Stamp, Stamp>;
  struct Entry {
    CtxPtr ctx;
    Stamps stamps;
  };
  std::mutex mu_;
  std::map<Key, Entry> entries_;
};

ContextCache& Contexts() {
  static ContextCache* cache = new ContextCache;  // never destroyed: threads may outlive main
  return *cache;
}

bool IsIpAddress(const std::string& name) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

// A failed certificate check, by its X509 verify result.
TlsFailure VerifyFailure(long result, const std::string& name) {
  const std::string detail = X509_verify_cert_error_string(result);
  switch (result) {
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return {ConnectFailure::kTlsNameMismatch,
              "TLS: the master's certificate is not for \"" + name +
                  "\" (name mismatch); if it is issued for another name, set "
                  "redis_tls_server_name to it"};
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return {ConnectFailure::kTlsExpired, "TLS: the master's certificate has expired"};
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return {ConnectFailure::kTlsExpired,
              "TLS: the master's certificate is not valid yet (check both hosts' clocks)"};
    default:
      return {ConnectFailure::kTlsUntrusted,
              "TLS: the master's certificate is not trusted: " + detail +
                  " (does redis_tls_ca_file hold the CA that issued it?)"};
  }
}

// A failure OpenSSL reported by reason code (the first queued error).
TlsFailure ProtocolFailure(unsigned long code, bool handshake) {
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  switch (ERR_GET_REASON(code)) {
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_HTTP_REQUEST:
    case SSL_R_UNKNOWN_PROTOCOL:
      if (handshake) {
        return {ConnectFailure::kTlsNotTls,
                "TLS: the master answered in plain text; is this a plain-text Redis port? "
                "then use redis:// (" + std::string(text) + ")"};
      }
      break;
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      return {ConnectFailure::kTlsClientCert,
              "TLS: the master requires a client certificate; set redis_tls_cert_file and "
              "redis_tls_key_file"};
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
      return {ConnectFailure::kTlsClientCert,
              "TLS: the master refused our client certificate (" + std::string(text) +
                  "); is redis_tls_cert_file signed by a CA the master trusts?"};
    default:
      break;
  }
  return {ConnectFailure::kTlsOther, std::string("TLS: ") + text};
}

}  // namespace

std::variant<std::unique_ptr<TlsStream>, TlsFailure> TlsStream::Open(
    int fd, const MasterAddress& address) {
  auto ctx = Contexts().For(address.tls);
  if (auto* failure = std::get_if<TlsFailure>(&ctx)) return *failure;
  ERR_clear_error();
  SSL* ssl = SSL_new(std::get<CtxPtr>(ctx).get());
  const std::string name =
      address.tls.server_name.empty() ? address.host : address.tls.server_name;
  std::unique_ptr<TlsStream> stream(ssl == nullptr ? nullptr : new TlsStream(ssl, name));
  if (!stream || SSL_set_fd(ssl, fd) != 1) {
    return TlsFailure{ConnectFailure::kTlsOther, "TLS: cannot start a session: " + OpenSslError()};
  }
  const bool ip = IsIpAddress(name);
  if (!ip) SSL_set_tlsext_host_name(ssl, name.c_str());
  if (address.tls.verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    const int set = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                       : X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
    if (set != 1) {
      return TlsFailure{ConnectFailure::kTlsConfig,
                        "TLS: \"" + name + "\" cannot be checked as a certificate name"};
    }
  }
  SSL_set_connect_state(ssl);
  return stream;
}

TlsStream::~TlsStream() { SSL_free(ssl_); }

TlsStream::Io TlsStream::Handshake() {
  ERR_clear_error();
  return Outcome(SSL_do_handshake(ssl_), /*handshake=*/true);
}

TlsStream::Io TlsStream::Read(char* buf, size_t cap, size_t& n) {
  ERR_clear_error();
  const int ret = SSL_read_ex(ssl_, buf, cap, &n);
  return Outcome(ret, /*handshake=*/false);
}

TlsStream::Io TlsStream::Write(const char* data, size_t len, size_t& n) {
  ERR_clear_error();
  const int ret = SSL_write_ex(ssl_, data, len, &n);
  return Outcome(ret, /*handshake=*/false);
}

TlsStream::Io TlsStream::Outcome(int ret, bool handshake) {
  if (ret == 1) return Io::kDone;
  const int error = SSL_get_error(ssl_, ret);
  switch (error) {
    case SSL_ERROR_WANT_READ:
      return Io::kWantRead;
    case SSL_ERROR_WANT_WRITE:
      return Io::kWantWrite;
    case SSL_ERROR_ZERO_RETURN:
      failure_ = {ConnectFailure::kClosed, "connection closed by the server (TLS close_notify)"};
      return Io::kClosed;
    case SSL_ERROR_SYSCALL: {
      const int saved = errno;
      const unsigned long code = ERR_peek_error();
      if (code != 0) {
        failure_ = ProtocolFailure(code, handshake);
      } else if (handshake) {
        failure_ = {ConnectFailure::kTlsOther,
                    "TLS: the master closed the connection during the handshake" +
                        (saved != 0 ? " (" + std::string(std::strerror(saved)) + ")" : "")};
      } else {
        failure_ = {ConnectFailure::kClosed,
                    saved != 0 ? std::string(std::strerror(saved))
                               : "connection closed by the server"};
      }
      ERR_clear_error();
      return code == 0 && !handshake ? Io::kClosed : Io::kFailed;
    }
    default: {
      const long verify = SSL_get_verify_result(ssl_);
      const unsigned long code = ERR_peek_error();
      if (handshake && verify != X509_V_OK) {
        failure_ = VerifyFailure(verify, name_);
      } else {
        failure_ = ProtocolFailure(code, handshake);
      }
      ERR_clear_error();
      return Io::kFailed;
    }
  }
}

}  // namespace lw
