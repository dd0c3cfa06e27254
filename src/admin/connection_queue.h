#pragma once
// ConnectionQueue: the admin HTTP server's bounded queue of accepted connections (an httplib
// TaskQueue). It decides which connections are served and which are shed; BoundedHttpServer
// runs them.

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lw {

// Worker threads for a bound: as many as connections may be admitted, up to kMaxHttpWorkers.
// Fewer workers than admitted connections would let that many slow clients (each cut only at its
// deadline) delay every other request by up to the timeout.
inline constexpr size_t kMaxHttpWorkers = 32;
size_t HttpWorkersFor(size_t max_connections);

// httplib's TaskQueue with a bound: runs each accepted connection's task on one of `workers`
// threads, with at most `capacity` tasks running or waiting. For a task past the bound it first
// asks make_room (if set) to end a running connection: if it did, the task is admitted in its
// place (EvictionDone() says the evicted one is gone); otherwise the task runs at once on the
// caller's thread (httplib's accept loop) with ShedNow() true: it must answer and close without
// blocking.
class ConnectionQueue final : public httplib::TaskQueue {
 public:
  using Clock = std::chrono::steady_clock;

  ConnectionQueue(size_t workers, size_t capacity, std::function<bool()> make_room = nullptr);
  ~ConnectionQueue() override;
  ConnectionQueue(const ConnectionQueue&) = delete;
  ConnectionQueue& operator=(const ConnectionQueue&) = delete;

  void enqueue(std::function<void()> fn) override;
  // Runs what is queued, then joins the workers.
  void shutdown() override;

  size_t waiting() const;   // tasks not yet picked up by a worker
  size_t admitted() const;  // running or waiting
  // More tasks are admitted than there are workers: one waits that no worker is free for.
  bool NeedsWorker() const;
  // A connection make_room ended is gone (its task is about to return).
  void EvictionDone();

  // Inside a task: whether it is being shed, and when it was enqueued (its connection accepted).
  static bool ShedNow();
  static Clock::time_point EnqueuedAt();

 private:
  struct Task {
    std::function<void()> fn;
    Clock::time_point enqueued;
  };
  void Work();

  const size_t workers_;
  const size_t capacity_;
  const std::function<bool()> make_room_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  size_t admitted_ = 0;
  size_t evicting_ = 0;  // admitted in place of a connection that has not ended yet
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace lw
