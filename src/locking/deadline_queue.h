#pragma once
// DeadlineQueue: many one-shot deadlines on one libuv timer.
//
// The engine has a deadline per queued acquire (wait_ms) and per held lock (its next renewal,
// or the end of its validity). A libuv timer each costs a heap handle, a std::function and a
// close callback per acquire, and some 300 bytes per held lock: at 100k held locks that alone
// is tens of MiB. Here a deadline is 16 bytes in a min-heap.
//
// There is no cancel: an entry fires at its time and the owner ignores it if it no longer
// applies (the engine keeps the current due time of each serial and compares). So that
// superseded entries (a granted acquire's wait deadline, say) do not pile up, the heap is
// rebuilt without them whenever they outnumber the live ones.

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "redis/timer.h"

namespace lw {

class DeadlineQueue {
 public:
  using Clock = std::chrono::steady_clock;
  // Called from the loop for each entry whose time came, earliest first.
  using Fire = std::function<void(uint64_t serial, Clock::time_point due)>;
  // Does this entry still apply? (Asked only when the heap is compacted.)
  using Live = std::function<bool(uint64_t serial, Clock::time_point due)>;

  // live_count: how many entries apply now (the owner's count of current deadlines).
  DeadlineQueue(uv_loop_t* loop, Fire fire, Live live, std::function<size_t()> live_count);

  void Add(Clock::time_point due, uint64_t serial);
  // Drops every entry and stops the timer (the owner has no deadline left).
  void Clear();
  size_t size() const { return heap_.size(); }

 private:
  void OnTimer();
  void Arm();

  using Entry = std::pair<Clock::time_point, uint64_t>;
  std::vector<Entry> heap_;  // a min-heap (std::push_heap with std::greater)
  Fire fire_;
  Live live_;
  std::function<size_t()> live_count_;
  Timer timer_;
  Clock::time_point armed_for_ = Clock::time_point::max();
};

// ResourceDeadlines: the one current deadline of each waiter (wait_ms, by waiter id) and each
// held lock (its next renewal or the end of its validity, by serial), tagged with the resource
// it belongs to. Setting a serial's deadline again replaces it; `fire` runs once for the
// current deadline of a serial when it comes, after the serial was forgotten.
class ResourceDeadlines {
 public:
  using Clock = std::chrono::steady_clock;
  using Fire = std::function<void(uint64_t serial, const std::string& name)>;

  ResourceDeadlines(uv_loop_t* loop, Fire fire);

  void Set(uint64_t serial, const std::string& name, Clock::time_point due);
  void Erase(uint64_t serial) { current_.erase(serial); }
  // Forgets every deadline and refuses new ones (the engine is shutting down): nothing keeps
  // the loop alive any more. Idempotent.
  void Close();

 private:
  struct Current {
    std::string name;
    Clock::time_point due;
  };
  void OnDue(uint64_t serial, Clock::time_point due);

  Fire fire_;
  std::unordered_map<uint64_t, Current> current_;
  DeadlineQueue queue_;
  bool closed_ = false;
};

}  // namespace lw
