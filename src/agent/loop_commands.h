#pragma once
// LoopCommands: how other threads (admin HTTP) hand work to the event loop, which alone owns
// lock state. Post() may be called from any thread; the work runs on the loop thread, in the
// order posted, on one of its next turns.

#include <uv.h>

#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>

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

  // Any thread but the loop's: runs `work` on the loop, which answers by calling its argument
  // once (at once or later, on the loop), and waits up to `timeout` for the answer. nullopt:
  // closed, dropped unanswered (work that never calls it), or no answer in time.
  template <class T>
  std::optional<T> Ask(std::function<void(std::function<void(T)> answer)> work,
                       std::chrono::milliseconds timeout) {
    auto promise = std::make_shared<std::promise<T>>();
    auto result = promise->get_future();
    const bool posted = Post([work = std::move(work), promise] {
      work([promise](T value) { promise->set_value(std::move(value)); });
    });
    if (!posted || result.wait_for(timeout) != std::future_status::ready) return std::nullopt;
    try {
      return result.get();
    } catch (const std::future_error&) {
      return std::nullopt;  // dropped unanswered
    }
  }

 private:
  static void OnWake(uv_async_t* async);

  uv_async_t* async_;  // heap: freed by its close callback
  std::mutex mu_;
  std::deque<std::function<void()>> queue_;
  bool closed_ = false;
};

}  // namespace lw
