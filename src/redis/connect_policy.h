#pragma once
// What every connection to a master does alike, asynchronous (NodeClient, Subscriber) or
// blocking (BlockingConnection): the AUTH it sends, how a refused AUTH reads, and how long it
// waits before trying again.

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/master_address.h"

namespace lw {

// Why an attempt to connect to a master failed: the `reason` label of
// lockwarden_master_connect_failures_total (kConnectFailureNames, same order).
enum class ConnectFailure {
  kConnect,              // the TCP connect failed (refused, unreachable)
  kTimeout,              // no connection, or no answer to AUTH/handshake, before the deadline
  kAuth,                 // AUTH refused
  kClosed,               // the server closed the connection before the handshake was done
  kHandshake,            // the owner's handshake (SCRIPT LOAD, SUBSCRIBE, ...) was refused
  kTlsUntrusted,         // the certificate chain leads to no trusted CA
  kTlsNameMismatch,      // the certificate does not name the master
  kTlsExpired,           // the certificate expired (or is not valid yet)
  kTlsClientCert,        // the master refused our client certificate, or wanted one
  kTlsNotTls,            // the master answered a TLS hello in plain text
  kTlsHandshakeTimeout,  // no TLS handshake before the deadline
  kTlsConfig,            // a CA, certificate or key file could not be loaded
  kTlsOther,             // any other TLS failure
  kCount
};
inline constexpr std::array<std::string_view, static_cast<size_t>(ConnectFailure::kCount)>
    kConnectFailureNames = {"connect",         "timeout",     "auth",
                            "closed",          "handshake",   "tls_untrusted",
                            "tls_name_mismatch", "tls_expired", "tls_client_cert",
                            "tls_not_tls",     "tls_handshake_timeout", "tls_config",
                            "tls_other"};

// How a master is spoken to, for people: "off", "verified" or "unverified" (NodeStatus::tls).
inline std::string TlsModeOf(const MasterAddress& address) {
  if (!address.tls.enabled) return "off";
  return address.tls.verify ? "verified" : "unverified";
}

// AUTH [user] password for `address`; empty when it has no password (nothing to send).
inline std::vector<std::string> AuthCommand(const MasterAddress& address) {
  if (address.password.empty()) return {};
  if (address.user.empty()) return {"AUTH", address.password};
  return {"AUTH", address.user, address.password};
}

// Why a connection failed when the master refused AUTH (`answer`: its error text). Never the
// command itself: it carries the password.
inline std::string AuthFailed(std::string_view answer) {
  return "AUTH failed: " + std::string(answer);
}

// Exponential reconnect backoff: 50 ms after the first failure, doubling up to max_ms; back to
// 50 ms once a connection was established (Reset).
class ReconnectBackoff {
 public:
  explicit ReconnectBackoff(int64_t max_ms) : max_ms_(max_ms) {}
  // The delay before the next attempt (and the one after grows).
  int64_t Next() {
    delay_ms_ = delay_ms_ == 0 ? kFirstMs : std::min(delay_ms_ * 2, max_ms_);
    return delay_ms_;
  }
  void Reset() { delay_ms_ = 0; }

 private:
  static constexpr int64_t kFirstMs = 50;
  int64_t max_ms_;
  int64_t delay_ms_ = 0;
};

}  // namespace lw
