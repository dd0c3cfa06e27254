#pragma once
// Where a Redis master is and how to log in to it. Pure data: config/ parses it from a URL,
// redis/ connects with it.

#include <string>

namespace lw {

// TLS to a master (a rediss:// URL). The files are read when a connection is opened, and read
// again when one of them changed on disk (redis/tls.h), so a renewed certificate is used from
// the next connection on.
struct TlsOptions {
  bool enabled = false;
  std::string ca_file;      // trusted CAs (PEM); empty: the system's store
  std::string cert_file;    // client certificate (PEM), for tls-auth-clients; empty: none
  std::string key_file;     // its private key (PEM); set exactly when cert_file is
  std::string server_name;  // SNI and the name the certificate must carry; empty: the host
  bool verify = true;       // false: any certificate is accepted (insecure, logged)
};

struct MasterAddress {
  std::string host;
  int port = 6379;
  std::string user;      // empty: no ACL user (AUTH password only, if password set)
  std::string password;  // empty: no AUTH. Never logged.
  TlsOptions tls;
  // "host:port" ("[v6]:port" for an IPv6 host) — safe to log and show (no credentials).
  std::string Display() const;
};

}  // namespace lw
