#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdio>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <thread>

namespace lw::test {

int WaitChild(pid_t pid, milliseconds deadline) {
  const auto end = SteadyClock::now() + deadline;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -2;
    }
    if (r < 0 || SteadyClock::now() >= end) return -1;
    std::this_thread::sleep_for(milliseconds(2));
  }
}

Fifo::Fifo(const std::string& path) : path_(path) {
  if (mkfifo(path.c_str(), 0600) != 0) throw std::runtime_error("mkfifo " + path);
  // O_RDWR keeps the pipe open even between writers, so poll never reports a spurious EOF.
  fd_ = open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error("open fifo " + path);
}

Fifo::~Fifo() {
  if (fd_ >= 0) close(fd_);
  unlink(path_.c_str());
}

std::string Fifo::ReadLine(milliseconds deadline) {
  const auto end = SteadyClock::now() + deadline;
  for (;;) {
    const auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<milliseconds>(end - SteadyClock::now()).count();
    if (left <= 0) return "";
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[256];
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n > 0) buffer_.append(buf, static_cast<size_t>(n));
  }
}

void UntilConclusive(int attempts, const std::function<bool()>& attempt) {
  for (int i = 1; i <= attempts; ++i) {
    if (attempt()) return;
    std::printf("[ note     ] attempt %d was inconclusive (a slow moment of the box); again\n", i);
  }
  ADD_FAILURE() << "no conclusive attempt in " << attempts << " (the box is far too loaded)";
}

}  // namespace lw::test
