#pragma once
// RAII over libuv's timer, and over its check and idle handles (AfterPoll). Handles live on the
// heap and are freed in their close callbacks, so each may be destroyed at any time, including
// from inside its own callback.

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

// Runs a callback once, after the loop's next poll for I/O (libuv's check phase), that poll made
// not to block (an idle handle runs meanwhile): whatever already waited in the sockets when it
// was armed is read first. For a decision a late loop must not get wrong: a deadline that passed
// while the loop was busy is judged once the loop has looked at what arrived meanwhile (a timer
// fires before its turn's poll). A handle on the heap, like Timer's.
class AfterPoll {
 public:
  explicit AfterPoll(uv_loop_t* loop);
  ~AfterPoll();
  AfterPoll(const AfterPoll&) = delete;
  AfterPoll& operator=(const AfterPoll&) = delete;

  // Replaces any pending run.
  void Arm(std::function<void()> fn);
  bool armed() const;

  struct Handle;  // implementation detail (outlives the AfterPoll until libuv closes it)

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
