#include "tls_servers.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "support/files.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test {

void RunTool(const std::vector<std::string>& argv, const std::string& dir) {
  const std::string out = dir + "/" + std::filesystem::path(argv[0]).filename().string() + ".out";
  const pid_t pid = SpawnTestProcess(argv, out);
  const int code = WaitChild(pid, milliseconds(30'000));
  if (code == 0) return;
  if (code < 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  std::string command;
  for (const auto& a : argv) command += a + " ";
  throw std::runtime_error(command + "failed (" + std::to_string(code) + "):\n" + FileTail(out));
}

namespace {

const std::vector<std::string> kEcKey = {"-newkey", "ec", "-pkeyopt",
                                         "ec_paramgen_curve:prime256v1", "-nodes"};

}  // namespace

TestPki::TestPki(std::string dir, const std::string& stem)
    : dir_(std::move(dir)), stem_(stem), ca_(dir_ + "/" + stem + ".crt") {
  std::vector<std::string> ca = {"openssl", "req", "-x509"};
  ca.insert(ca.end(), kEcKey.begin(), kEcKey.end());
  ca.insert(ca.end(), {"-keyout", dir_ + "/" + stem + ".key", "-out", ca_, "-days", "2", "-subj",
                       "/CN=lockwarden test CA " + stem});
  RunTool(ca, dir_);
  chmod(ca_.c_str(), 0644);
}

TestPki::Issued TestPki::Issue(const std::string& stem, const std::string& name, int days,
                               bool client) const {
  const std::string d = dir_ + "/";
  Issued out{d + stem + ".crt", d + stem + ".key"};
  std::vector<std::string> csr = {"openssl", "req"};
  csr.insert(csr.end(), kEcKey.begin(), kEcKey.end());
  csr.insert(csr.end(), {"-keyout", out.key, "-out", d + stem + ".csr", "-subj", "/CN=" + name});
  RunTool(csr, dir_);
  std::ofstream(d + stem + ".ext")
      << (client ? "extendedKeyUsage=clientAuth\n"
                 : "subjectAltName=DNS:" + name + ",IP:127.0.0.1\n");
  RunTool({"openssl", "x509", "-req", "-in", d + stem + ".csr", "-CA", ca_, "-CAkey",
           d + stem_ + ".key", "-CAcreateserial", "-out", out.cert, "-days", std::to_string(days),
           "-extfile", d + stem + ".ext"},
          dir_);
  return out;
}

Children::~Children() {
  for (pid_t pid : pids_) Kill(pid);
}

pid_t Children::Add(pid_t pid) {
  pids_.push_back(pid);
  return pid;
}

void Children::Kill(pid_t pid) {
  if (kill(pid, SIGKILL) == 0) waitpid(pid, nullptr, 0);
}

bool Children::Alive(pid_t pid) {
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == 0;
}

int StartTlsRedis(Children& children, const std::string& dir, const std::string& name,
                  const TlsRedisOptions& o) {
  const std::string d = dir + "/" + name;
  std::filesystem::create_directory(d);
  const std::string log = d + "/redis.log";
  std::string why;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int port = PickFreePort();
    // clang-format off
    std::vector<std::string> argv = {
        "redis-server",
        "--port", "0",
        "--tls-port", std::to_string(port),
        "--tls-cert-file", o.cert,
        "--tls-key-file", o.key,
        "--tls-ca-cert-file", o.ca,
        "--tls-auth-clients", o.auth_clients ? "yes" : "no",
        "--bind", "127.0.0.1",
        "--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
        "--dir", d, "--logfile", log};
    // clang-format on
    argv.insert(argv.end(), o.extra.begin(), o.extra.end());
    const pid_t pid = children.Add(SpawnTestProcess(argv, d + "/redis.out"));
    // Its log is the only word on readiness; an early exit is a taken port (or no TLS).
    const bool ready = Eventually(
        [&] {
          return !Children::Alive(pid) ||
                 ReadFile(log).find("Ready to accept connections") != std::string::npos;
        },
        milliseconds(5000));
    if (ready && Children::Alive(pid)) return port;
    Children::Kill(pid);
    why = "redis-server with TLS on port " + std::to_string(port) + " did not start:\n" +
          FileTail(log) + FileTail(d + "/redis.out");
  }
  throw std::runtime_error(why);
}

}  // namespace lw::test
