#include "support/redis_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>

#include "support/polling.h"

namespace lw::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kInspectTimeout{1000};
constexpr milliseconds kReadyDeadline{10'000};
constexpr milliseconds kReadyProbeTimeout{200};
constexpr milliseconds kReadyPause{10};
constexpr int kStartAttempts = 5;
// A restart on the same port: the old process's sockets are released asynchronously (and a
// listening socket in TIME_WAIT or another process may hold it for a moment).
constexpr milliseconds kRestartDeadline{10'000};
constexpr milliseconds kRestartPause{100};

std::string ErrnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

// --- Child side of SpawnTestProcess: only async-signal-safe calls from fork to exec. ---

[[noreturn]] void ExecChild(char* const* argv, char* const* envp, pid_t parent, int in_fd,
                            int out_fd, int err_pipe) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
  if (dup2(in_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
      dup2(out_fd, STDERR_FILENO) < 0) {
    int e = errno;
    (void)!write(err_pipe, &e, sizeof e);
    _exit(127);
  }
  sigset_t none;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, nullptr);
  // Ignored signals stay ignored across exec; the test (or a client library) may ignore these.
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD}) signal(sig, SIG_DFL);
  // Close-on-exec rather than close, so err_pipe stays open until exec succeeds.
  if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    long max_fd = sysconf(_SC_OPEN_MAX);
    if (max_fd < 0) max_fd = 65536;
    for (int fd = 3; fd < max_fd; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  execvpe(argv[0], argv, envp);
  int e = errno;
  (void)!write(err_pipe, &e, sizeof e);
  _exit(127);
}

// --- Short-lived blocking hiredis connections. ---

struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;

timeval ToTimeval(milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// Runs one command on a fresh connection to 127.0.0.1:port, after AUTH <password> unless the
// password is empty; connect and reply each bounded by timeout. Returns nullptr when the master
// cannot be reached, refuses the AUTH or does not answer in time.
ReplyPtr Command(int port, const std::string& password, const std::vector<std::string>& args,
                 milliseconds timeout) {
  std::unique_ptr<redisContext, ContextFree> ctx(
      redisConnectWithTimeout("127.0.0.1", port, ToTimeval(timeout)));
  if (!ctx || ctx->err != 0) return nullptr;
  if (redisSetTimeout(ctx.get(), ToTimeval(timeout)) != REDIS_OK) return nullptr;
  if (!password.empty()) {
    const char* auth[] = {"AUTH", password.c_str()};
    const size_t auth_lens[] = {4, password.size()};
    ReplyPtr ok(static_cast<redisReply*>(redisCommandArgv(ctx.get(), 2, auth, auth_lens)));
    if (!ok || ok->type != REDIS_REPLY_STATUS) return nullptr;
  }
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  void* reply =
      redisCommandArgv(ctx.get(), static_cast<int>(argv.size()), argv.data(), lens.data());
  return ReplyPtr(static_cast<redisReply*>(reply));
}

std::string ReplyString(const redisReply& r) { return std::string(r.str, r.len); }

// The process_id the server on port reports, or -1 when it does not answer. Lets readiness tell
// our child apart from some other server that happens to hold the port.
pid_t ServerPid(int port, const std::string& password, milliseconds timeout) {
  ReplyPtr r = Command(port, password, {"INFO", "server"}, timeout);
  if (!r || r->type != REDIS_REPLY_STRING) return -1;
  std::istringstream in(ReplyString(*r));
  std::string line;
  constexpr std::string_view kField = "process_id:";
  while (std::getline(in, line)) {
    if (line.rfind(kField, 0) == 0)
      return static_cast<pid_t>(std::atol(line.c_str() + kField.size()));
  }
  return -1;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "wait status " + std::to_string(status);
}

void ReapBlocking(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

// The environment of a spawned child: ours without LOCKWARDEN_* (see SpawnTestProcess), then
// extra_env, each entry replacing a variable of the same name.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& extra_env) {
  const auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.starts_with("LOCKWARDEN_")) continue;
    bool replaced = false;
    for (const auto& extra : extra_env) replaced |= name_of(extra) == name_of(entry);
    if (!replaced) env.emplace_back(entry);
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  return env;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Process helpers

pid_t SpawnTestProcess(const std::vector<std::string>& argv, const std::string& output_path,
                       const std::vector<std::string>& extra_env) {
  if (argv.empty()) throw std::runtime_error("SpawnTestProcess: empty argv");
  // Everything the child needs is prepared before fork: the child must not allocate.
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const std::vector<std::string> env = ChildEnvironment(extra_env);
  std::vector<char*> cenv;
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  int out_fd = open(output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out_fd < 0) throw std::runtime_error(ErrnoText("cannot open " + output_path));
  int in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int err_pipe[2] = {-1, -1};
  if (in_fd < 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    std::string msg = ErrnoText("SpawnTestProcess: /dev/null or pipe");
    close(out_fd);
    if (in_fd >= 0) close(in_fd);
    throw std::runtime_error(msg);
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) ExecChild(cargv.data(), cenv.data(), parent, in_fd, out_fd, err_pipe[1]);
  int fork_errno = errno;
  close(out_fd);
  close(in_fd);
  close(err_pipe[1]);
  if (pid < 0) {
    close(err_pipe[0]);
    errno = fork_errno;
    throw std::runtime_error(ErrnoText("fork"));
  }
  setpgid(pid, pid);  // also from the parent, so the group exists before we return (races ok)
  // EOF means exec succeeded (the pipe was close-on-exec); an int means it failed with errno.
  int child_errno = 0;
  ssize_t got;
  do {
    got = read(err_pipe[0], &child_errno, sizeof child_errno);
  } while (got < 0 && errno == EINTR);
  close(err_pipe[0]);
  if (got > 0) {
    ReapBlocking(pid);
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(child_errno));
  }
  return pid;
}

std::string FileTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  std::streamoff size = in.tellg();
  std::streamoff start = size > static_cast<std::streamoff>(max_bytes)
                             ? size - static_cast<std::streamoff>(max_bytes)
                             : 0;
  in.seekg(start);
  std::string text(static_cast<size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (start > 0) {
    size_t nl = text.find('\n');  // drop the partial first line
    if (nl != std::string::npos) text.erase(0, nl + 1);
  }
  return text;
}

int PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(ErrnoText("socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::string msg = ErrnoText("PickFreePort");
    close(fd);
    throw std::runtime_error(msg);
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// ---------------------------------------------------------------------------------------------
// RedisCluster

RedisCluster::RedisCluster(int n) : RedisCluster(n, RedisClusterOptions{}) {}

RedisCluster::RedisCluster(int n, RedisClusterOptions options) : options_(std::move(options)) {
  if (n <= 0) throw std::invalid_argument("RedisCluster needs at least one master");
  nodes_.resize(static_cast<size_t>(n));
  try {
    for (Node& nd : nodes_) {
      nd.dir = MakeTempDir("lw-redis-");
      nd.port = PickFreePort();
      Start(nd, /*may_change_port=*/true);
    }
  } catch (...) {
    Cleanup();
    throw;
  }
}

RedisCluster::~RedisCluster() { Cleanup(); }

void RedisCluster::Cleanup() noexcept {
  for (Node& nd : nodes_) {
    if (nd.pid > 0) {
      if (nd.stopped) kill(nd.pid, SIGCONT);
      kill(nd.pid, SIGKILL);
      ReapBlocking(nd.pid);
      nd.pid = -1;
      nd.stopped = false;
    }
    if (!nd.dir.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(nd.dir, ec);
    }
  }
}

const RedisCluster::Node& RedisCluster::node(int i) const {
  if (i < 0 || i >= size()) {
    throw std::out_of_range("RedisCluster: no master " + std::to_string(i) + " of " +
                            std::to_string(size()));
  }
  return nodes_[static_cast<size_t>(i)];
}

RedisCluster::Node& RedisCluster::node(int i) {
  return const_cast<Node&>(static_cast<const RedisCluster*>(this)->node(i));
}

bool RedisCluster::TryStart(Node& nd, std::string* why) {
  const std::string log = nd.dir + "/redis.log";
  const std::string out = nd.dir + "/redis.out";
  // clang-format off
  std::vector<std::string> argv = {
      "redis-server",
      "--port", std::to_string(nd.port),
      "--bind", "127.0.0.1",
      "--save", "",
      "--appendonly", "no",
      "--daemonize", "no",
      "--dir", nd.dir,
      "--logfile", log,
      "--protected-mode", "no",
  };
  // clang-format on
  argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  pid_t pid = SpawnTestProcess(argv, out);
  // redis-server offers no readiness event, so probe until it answers as this very process.
  const auto deadline = Clock::now() + kReadyDeadline;
  while (true) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      *why = "redis-server on port " + std::to_string(nd.port) + " " + DescribeWaitStatus(status) +
             "\n--- redis.log ---\n" + FileTail(log) + "--- stdout/stderr ---\n" + FileTail(out);
      return false;
    }
    if (ServerPid(nd.port, options_.password, kReadyProbeTimeout) == pid) {
      nd.pid = pid;
      nd.last_pid = pid;
      nd.stopped = false;
      return true;
    }
    if (Clock::now() >= deadline) {
      kill(pid, SIGKILL);
      ReapBlocking(pid);
      throw std::runtime_error("redis-server on port " + std::to_string(nd.port) +
                               " did not answer within 10 s\n--- redis.log ---\n" + FileTail(log) +
                               "--- stdout/stderr ---\n" + FileTail(out));
    }
    std::this_thread::sleep_for(kReadyPause);
  }
}

void RedisCluster::Start(Node& nd, bool may_change_port) {
  std::string why;
  if (!may_change_port) {
    // Same port: retry until the old process's socket is gone, with a generous deadline.
    const auto give_up = Clock::now() + kRestartDeadline;
    int attempts = 0;
    for (;;) {
      ++attempts;
      if (TryStart(nd, &why)) return;
      if (Clock::now() >= give_up) break;
      std::this_thread::sleep_for(kRestartPause);
    }
    throw std::runtime_error("cannot restart redis-server on port " + std::to_string(nd.port) +
                             " within 10 s (" + std::to_string(attempts) +
                             " attempts); last: " + why);
  }
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    if (attempt > 0) nd.port = PickFreePort();
    if (TryStart(nd, &why)) return;
  }
  throw std::runtime_error("cannot start redis-server after " + std::to_string(kStartAttempts) +
                           " attempts; last: " + why);
}

int RedisCluster::port(int i) const { return node(i).port; }

std::string RedisCluster::url(int i) const {
  return "redis://127.0.0.1:" + std::to_string(node(i).port);
}

std::vector<std::string> RedisCluster::urls() const {
  std::vector<std::string> result;
  for (int i = 0; i < size(); ++i) result.push_back(url(i));
  return result;
}

const std::string& RedisCluster::dir(int i) const { return node(i).dir; }

pid_t RedisCluster::pid(int i) const { return node(i).last_pid; }

void RedisCluster::Kill(int i) {
  Node& nd = node(i);
  if (nd.pid <= 0) return;
  kill(nd.pid, SIGKILL);  // also ends a stopped process
  ReapBlocking(nd.pid);
  nd.pid = -1;
  nd.stopped = false;
}

void RedisCluster::Stop(int i) {
  Node& nd = node(i);
  if (nd.pid <= 0 || nd.stopped) return;
  kill(nd.pid, SIGSTOP);
  // Wait for the stop to take effect (or for an exit), leaving any exit for Kill to reap.
  siginfo_t info{};
  while (waitid(P_PID, static_cast<id_t>(nd.pid), &info, WSTOPPED | WEXITED | WNOWAIT) < 0 &&
         errno == EINTR) {
  }
  nd.stopped = true;
}

void RedisCluster::Cont(int i) {
  Node& nd = node(i);
  if (nd.pid <= 0 || !nd.stopped) return;
  kill(nd.pid, SIGCONT);
  siginfo_t info{};
  while (waitid(P_PID, static_cast<id_t>(nd.pid), &info, WCONTINUED | WEXITED | WNOWAIT) < 0 &&
         errno == EINTR) {
  }
  nd.stopped = false;
}

void RedisCluster::Restart(int i) {
  Kill(i);
  Start(node(i), /*may_change_port=*/false);
}

bool RedisCluster::running(int i) const {
  const Node& nd = node(i);
  if (nd.pid <= 0) return false;
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(nd.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return false;
  }
  return info.si_pid == 0;  // nothing to report: it has not exited
}

std::optional<std::string> RedisCluster::Get(int i, const std::string& key) const {
  ReplyPtr r = Command(port(i), options_.password, {"GET", key}, kInspectTimeout);
  if (!r || r->type != REDIS_REPLY_STRING) return std::nullopt;
  return ReplyString(*r);
}

int64_t RedisCluster::Pttl(int i, const std::string& key) const {
  ReplyPtr r = Command(port(i), options_.password, {"PTTL", key}, kInspectTimeout);
  if (!r || r->type != REDIS_REPLY_INTEGER) return kUnreachable;
  return r->integer;
}

std::vector<std::string> RedisCluster::Keys(int i, const std::string& pattern) const {
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    ReplyPtr r = Command(port(i), options_.password,
                         {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, kInspectTimeout);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
      return {};
    }
    cursor = ReplyString(*r->element[0]);
    const redisReply& batch = *r->element[1];
    for (size_t k = 0; k < batch.elements; ++k) keys.push_back(ReplyString(*batch.element[k]));
  } while (cursor != "0");
  return keys;
}

int RedisCluster::CountHolding(const std::string& key, const std::string& value) const {
  int count = 0;
  for (int i = 0; i < size(); ++i) {
    if (!running(i) || node(i).stopped) continue;
    if (Get(i, key) == value) ++count;
  }
  return count;
}

int RedisCluster::CountHoldingGrant(const std::string& key, const std::string& token) const {
  constexpr size_t kAgentIdChars = 16;
  int count = 0;
  for (int i = 0; i < size(); ++i) {
    if (!running(i) || node(i).stopped) continue;
    const std::optional<std::string> value = Get(i, key);
    if (!value || value->size() != kAgentIdChars + 1 + token.size()) continue;
    const bool agent_id = std::all_of(value->begin(), value->begin() + kAgentIdChars, [](char c) {
      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    });
    if (agent_id && (*value)[kAgentIdChars] == ':' && value->ends_with(token)) ++count;
  }
  return count;
}

namespace {
int AwaitCount(const std::function<int()>& count, int expected) {
  int now = count();
  Eventually([&] { return (now = count()) == expected; }, milliseconds(5'000));
  return now;
}
}  // namespace

int RedisCluster::AwaitHolding(const std::string& key, const std::string& value,
                               int expected) const {
  return AwaitCount([&] { return CountHolding(key, value); }, expected);
}

int RedisCluster::AwaitHoldingGrant(const std::string& key, const std::string& token,
                                    int expected) const {
  return AwaitCount([&] { return CountHoldingGrant(key, token); }, expected);
}

std::vector<std::pair<std::string, double>> RedisCluster::ZRange(int i,
                                                                 const std::string& key) const {
  std::vector<std::pair<std::string, double>> out;
  ReplyPtr r = Command(port(i), options_.password, {"ZRANGE", key, "0", "-1", "WITHSCORES"},
                       kInspectTimeout);
  if (!r || r->type != REDIS_REPLY_ARRAY) return out;
  for (size_t k = 0; k + 1 < r->elements; k += 2) {
    out.emplace_back(ReplyString(*r->element[k]), std::stod(ReplyString(*r->element[k + 1])));
  }
  return out;
}

int RedisCluster::CountWithKey(const std::string& key) const {
  int count = 0;
  for (int i = 0; i < size(); ++i) {
    if (!running(i) || node(i).stopped) continue;
    ReplyPtr r = Command(port(i), options_.password, {"EXISTS", key}, kInspectTimeout);
    if (r && r->type == REDIS_REPLY_INTEGER && r->integer > 0) ++count;
  }
  return count;
}

void RedisCluster::Set(int i, const std::string& key, const std::string& value, int64_t px_ms) {
  std::vector<std::string> args = {"SET", key, value};
  if (px_ms > 0) {
    args.push_back("PX");
    args.push_back(std::to_string(px_ms));
  }
  ReplyPtr r = Command(port(i), options_.password, args, kInspectTimeout);
  if (!r || r->type != REDIS_REPLY_STATUS || ReplyString(*r) != "OK") {
    throw std::runtime_error("SET " + key + " on master " + std::to_string(i) + " failed" +
                             (r && r->type == REDIS_REPLY_ERROR ? ": " + ReplyString(*r) : ""));
  }
}

void RedisCluster::OnEveryLiveMaster(const std::vector<std::string>& command) {
  for (int i = 0; i < size(); ++i) {
    if (!running(i) || node(i).stopped) continue;
    ReplyPtr r = Command(port(i), options_.password, command, kInspectTimeout);
    if (!r || r->type != REDIS_REPLY_STATUS || ReplyString(*r) != "OK") {
      throw std::runtime_error(command[0] + " on master " + std::to_string(i) + " failed");
    }
  }
}

void RedisCluster::FlushAll() { OnEveryLiveMaster({"FLUSHALL"}); }

void RedisCluster::ScriptFlush() { OnEveryLiveMaster({"SCRIPT", "FLUSH"}); }

void RedisCluster::Run(int i, const std::vector<std::string>& command) {
  ReplyPtr r = Command(port(i), options_.password, command, kInspectTimeout);
  if (!r || r->type != REDIS_REPLY_STATUS || ReplyString(*r) != "OK") {
    throw std::runtime_error(command.at(0) + " on master " + std::to_string(i) + " failed" +
                             (r && r->type == REDIS_REPLY_ERROR ? ": " + ReplyString(*r) : ""));
  }
}

int64_t RedisCluster::NumSub(int i, const std::string& channel) const {
  ReplyPtr r = Command(port(i), options_.password, {"PUBSUB", "NUMSUB", channel}, kInspectTimeout);
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
      r->element[1]->type != REDIS_REPLY_INTEGER) {
    return -1;
  }
  return r->element[1]->integer;
}

int64_t RedisCluster::Publish(int i, const std::string& channel, const std::string& message) const {
  ReplyPtr r = Command(port(i), options_.password, {"PUBLISH", channel, message}, kInspectTimeout);
  return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
}

}  // namespace lw::test
