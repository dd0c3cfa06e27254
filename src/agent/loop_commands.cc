#include "agent/loop_commands.h"

namespace lw {

LoopCommands::LoopCommands(uv_loop_t* loop) : async_(new uv_async_t) {
  uv_async_init(loop, async_, OnWake);
  async_->data = this;
}

LoopCommands::~LoopCommands() { Close(); }

bool LoopCommands::Post(std::function<void()> work) {
  {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    queue_.push_back(std::move(work));
    // uv_async_send is thread-safe; several sends before the loop wakes coalesce into one.
    uv_async_send(async_);
  }
  return true;
}

void LoopCommands::Close() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    queue_.clear();
  }
  async_->data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(async_),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_async_t*>(h); });
}

void LoopCommands::OnWake(uv_async_t* async) {
  auto* self = static_cast<LoopCommands*>(async->data);
  if (self == nullptr) return;
  std::deque<std::function<void()>> batch;
  {
    std::lock_guard lock(self->mu_);
    batch.swap(self->queue_);
  }
  for (auto& work : batch) work();
}

}  // namespace lw
