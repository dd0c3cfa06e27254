#include "admin/connection_queue.h"

#include <algorithm>

namespace lw {
namespace {

thread_local bool t_shed = false;
thread_local ConnectionQueue::Clock::time_point t_enqueued_at{};

}  // namespace

size_t HttpWorkersFor(size_t max_connections) {
  return std::clamp<size_t>(max_connections, 1, kMaxHttpWorkers);
}

ConnectionQueue::ConnectionQueue(size_t workers, size_t capacity, std::function<bool()> make_room)
    : workers_(workers), capacity_(capacity), make_room_(std::move(make_room)) {
  for (size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { Work(); });
}

ConnectionQueue::~ConnectionQueue() { shutdown(); }

void ConnectionQueue::enqueue(std::function<void()> fn) {
  bool stopping = false;
  {
    std::lock_guard lock(mu_);
    stopping = stopping_;
    if (!stopping && admitted_ < capacity_ + evicting_) {
      ++admitted_;
      tasks_.push_back({std::move(fn), Clock::now()});
      cv_.notify_one();
      return;
    }
  }
  // Outside the lock: make_room takes the server's own (and EvictionDone, from a worker, ours).
  if (!stopping && make_room_ && make_room_()) {
    std::lock_guard lock(mu_);
    ++evicting_;
    ++admitted_;
    tasks_.push_back({std::move(fn), Clock::now()});
    cv_.notify_one();
    return;
  }
  t_shed = true;
  t_enqueued_at = Clock::now();
  fn();
  t_shed = false;
}

void ConnectionQueue::shutdown() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

size_t ConnectionQueue::waiting() const {
  std::lock_guard lock(mu_);
  return tasks_.size();
}

size_t ConnectionQueue::admitted() const {
  std::lock_guard lock(mu_);
  return admitted_;
}

bool ConnectionQueue::NeedsWorker() const {
  std::lock_guard lock(mu_);
  return admitted_ > workers_;
}

void ConnectionQueue::EvictionDone() {
  std::lock_guard lock(mu_);
  if (evicting_ > 0) --evicting_;
}

bool ConnectionQueue::ShedNow() { return t_shed; }
ConnectionQueue::Clock::time_point ConnectionQueue::EnqueuedAt() { return t_enqueued_at; }

void ConnectionQueue::Work() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    t_enqueued_at = task.enqueued;
    task.fn();
    std::lock_guard lock(mu_);
    --admitted_;
  }
}

}  // namespace lw
