#include "redis/timer.h"

#include <utility>

namespace lw {

struct Timer::Handle {
  uv_timer_t timer;
  std::function<void()> fn;
  bool repeat = false;
};

namespace {
void OnFire(uv_timer_t* t) {
  auto* h = static_cast<Timer::Handle*>(t->data);
  if (h->repeat) {
    h->fn();
    return;
  }
  // Move out first: fn may restart or destroy this timer while it runs.
  auto fn = std::move(h->fn);
  h->fn = nullptr;
  if (fn) fn();
}
}  // namespace

Timer::Timer(uv_loop_t* loop) : handle_(new Handle) {
  uv_timer_init(loop, &handle_->timer);
  handle_->timer.data = handle_;
}

Timer::~Timer() {
  uv_timer_stop(&handle_->timer);
  handle_->fn = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(&handle_->timer),
           [](uv_handle_t* h) { delete static_cast<Handle*>(h->data); });
}

void Timer::Start(int64_t ms, std::function<void()> fn) {
  handle_->fn = std::move(fn);
  handle_->repeat = false;
  uv_timer_start(&handle_->timer, OnFire, ms < 0 ? 0 : static_cast<uint64_t>(ms), 0);
}

void Timer::StartRepeat(int64_t ms, std::function<void()> fn) {
  handle_->fn = std::move(fn);
  handle_->repeat = true;
  const auto period = ms <= 0 ? 1 : static_cast<uint64_t>(ms);
  uv_timer_start(&handle_->timer, OnFire, period, period);
}

void Timer::Stop() { uv_timer_stop(&handle_->timer); }

bool Timer::active() const {
  return uv_is_active(reinterpret_cast<const uv_handle_t*>(&handle_->timer)) != 0;
}

struct AfterPoll::Handle {
  uv_check_t check;
  uv_idle_t idle;
  std::function<void()> fn;
  int open = 2;  // handles not closed yet
};

AfterPoll::AfterPoll(uv_loop_t* loop) : handle_(new Handle) {
  uv_check_init(loop, &handle_->check);
  uv_idle_init(loop, &handle_->idle);
  handle_->check.data = handle_;
  handle_->idle.data = handle_;
}

AfterPoll::~AfterPoll() {
  uv_check_stop(&handle_->check);
  uv_idle_stop(&handle_->idle);
  handle_->fn = nullptr;
  auto closed = [](uv_handle_t* h) {
    auto* handle = static_cast<Handle*>(h->data);
    if (--handle->open == 0) delete handle;
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&handle_->check), closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&handle_->idle), closed);
}

void AfterPoll::Arm(std::function<void()> fn) {
  handle_->fn = std::move(fn);
  uv_idle_start(&handle_->idle, [](uv_idle_t*) {});  // an active idle handle: poll won't block
  uv_check_start(&handle_->check, [](uv_check_t* c) {
    auto* h = static_cast<AfterPoll::Handle*>(c->data);
    uv_check_stop(&h->check);
    uv_idle_stop(&h->idle);
    // Move out first: fn may re-arm or destroy this AfterPoll while it runs.
    auto run = std::move(h->fn);
    h->fn = nullptr;
    if (run) run();
  });
}

bool AfterPoll::armed() const {
  return uv_is_active(reinterpret_cast<const uv_handle_t*>(&handle_->check)) != 0;
}

void DeferQueue::Push(std::function<void()> fn) {
  pending_.push_back(std::move(fn));
  if (timer_.active()) return;
  timer_.Start(0, [this] {
    auto batch = std::move(pending_);
    pending_.clear();
    for (auto& f : batch) f();
  });
}

}  // namespace lw
