#pragma once
// LoopCommands: how other threads (admin HTTP) hand work to the event loop, which alone owns
// lock state. Post() may be called from any thread; the work runs on the loop thread, in the
// order posted, on one of its next turns.

#include <uv.h>

#include <deque>
#include <functional>
#include <mutex>

namespace lw {

class LoopCommands {
 public:
  explicit LoopCommands(uv_loop_t* loop);
  ~LoopCommands();  // loop thread; same as Close()
  LoopCommands(const LoopCommands&) = delete;
  LoopCommands& operator=(const LoopCommands&) = delete;

  // Any thread. False (and `work` dropped, never run) once closed.
  bool Post(std::function<void()> work);
  // Loop thread. Work posted but not yet run is dropped; later posts are refused.
  void Close();

 private:
  static void OnWake(uv_async_t* async);

  uv_async_t* async_;  // heap: freed by its close callback
  std::mutex mu_;
  std::deque<std::function<void()>> queue_;
  bool closed_ = false;
};

}  // namespace lw
