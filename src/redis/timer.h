#pragma once
// RAII over uv_timer_t. The handle lives on the heap and is freed in its close callback, so a
// Timer may be destroyed at any time, including from inside its own callback.

#include <uv.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace lw {

class Timer {
 public:
  explicit Timer(uv_loop_t* loop);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Runs fn once after ms (0 = next loop iteration). Replaces any pending run.
  void Start(int64_t ms, std::function<void()> fn);
  // Runs fn every ms until Stop. fn must not call Start/StartRepeat on this Timer.
  void StartRepeat(int64_t ms, std::function<void()> fn);
  void Stop();
  bool active() const;

  struct Handle;  // implementation detail (outlives the Timer until libuv closes it)

 private:
  Handle* handle_;
};

// Callbacks run together on a later loop turn, in the order pushed (never from inside Push):
// for answers that must not be given synchronously by the call that takes them.
class DeferQueue {
 public:
  explicit DeferQueue(uv_loop_t* loop) : timer_(loop) {}
  void Push(std::function<void()> fn);

 private:
  Timer timer_;
  std::vector<std::function<void()>> pending_;
};

}  // namespace lw
