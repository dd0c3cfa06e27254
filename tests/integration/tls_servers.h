#pragma once
// TLS for tests against real processes: a CA and certificates made by the openssl tool, and
// TLS-only redis-servers (--port 0 --tls-port P) that use them. Shared by the stunnel recipe's
// test (tls_test.cc) and the agent's own TLS (native_tls_test.cc).

#include <sys/types.h>

#include <string>
#include <vector>

namespace lw::test {

// Runs a tool to completion (openssl); throws std::runtime_error with its output when it fails.
void RunTool(const std::vector<std::string>& argv, const std::string& dir);

// A test CA in `dir` (ca.crt, ca.key; EC keys: quick) and the certificates it issues.
class TestPki {
 public:
  struct Issued {
    std::string cert;
    std::string key;
  };
  // Makes the CA. Throws when openssl fails.
  TestPki(std::string dir, const std::string& stem = "ca");
  const std::string& ca() const { return ca_; }
  // A certificate for DNS name `name` and IP 127.0.0.1 (both as subjectAltName), signed by this
  // CA, valid from now for `days` (negative: it expired that many days ago), in
  // <dir>/<stem>.crt and .key. `client`: for client authentication (no names).
  Issued Issue(const std::string& stem, const std::string& name, int days = 2,
               bool client = false) const;

 private:
  std::string dir_;
  std::string stem_;
  std::string ca_;
};

// Kills (SIGKILL) and reaps the processes it was given, at the latest when it goes away.
class Children {
 public:
  Children() = default;
  ~Children();
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;
  pid_t Add(pid_t pid);
  static void Kill(pid_t pid);
  // True while pid has not exited (it is not reaped here).
  static bool Alive(pid_t pid);

 private:
  std::vector<pid_t> pids_;
};

struct TlsRedisOptions {
  std::string cert;          // the server's certificate and key
  std::string key;
  std::string ca;            // CA for client certificates (redis-server needs one)
  bool auth_clients = false;  // tls-auth-clients yes: a client certificate is required
  std::vector<std::string> extra;  // more redis-server arguments (--requirepass, ...)
};

// Starts a TLS-only redis-server in <dir>/<name>, owned by `children`; returns its TLS port once
// its log says it is ready. Throws with its log when it does not start.
int StartTlsRedis(Children& children, const std::string& dir, const std::string& name,
                  const TlsRedisOptions& options);

}  // namespace lw::test
