#pragma once
// Small helpers shared by the integration tests.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

#include "support/polling.h"  // Eventually

namespace lw::test {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

inline std::string KeyOf(const std::string& resource) { return "lock:" + resource; }

inline double MsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t).count();
}

// Waits for `pid` (a child of this process) to exit; returns its exit code (128+signal if
// killed), or -1 if it is still running at the deadline.
int WaitChild(pid_t pid, milliseconds deadline);

// Runs `attempt` until it says its outcome was conclusive (true), at most `attempts` times;
// fails the test if none was. For checks whose meaning depends on the test doing something
// within a bound the agent's code fixes (e.g. a connection younger than the 1 s eviction age,
// a master restarted well within max_ttl): an attempt that did not manage it is not a failure
// of the agent and proves nothing, so it is repeated from scratch instead of being judged. An
// attempt judges (EXPECTs) only when it is conclusive.
void UntilConclusive(int attempts, const std::function<bool()>& attempt);

// A named pipe a child process writes a line into: an event the test can block on.
class Fifo {
 public:
  explicit Fifo(const std::string& path);
  ~Fifo();
  const std::string& path() const { return path_; }
  // The next line written into the pipe, or "" if none arrives in time.
  std::string ReadLine(milliseconds deadline);

 private:
  std::string path_;
  int fd_ = -1;
  std::string buffer_;
};

}  // namespace lw::test
