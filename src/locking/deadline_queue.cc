#include "locking/deadline_queue.h"

#include <algorithm>

namespace lw {

DeadlineQueue::DeadlineQueue(uv_loop_t* loop, Fire fire, Live live,
                             std::function<size_t()> live_count)
    : fire_(std::move(fire)),
      live_(std::move(live)),
      live_count_(std::move(live_count)),
      timer_(loop) {}

void DeadlineQueue::Add(Clock::time_point due, uint64_t serial) {
  if (heap_.size() >= 4096 && heap_.size() > 2 * live_count_()) {
    std::erase_if(heap_, [&](const Entry& e) { return !live_(e.second, e.first); });
    std::make_heap(heap_.begin(), heap_.end(), std::greater<>());
  }
  heap_.emplace_back(due, serial);
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
  if (due < armed_for_) Arm();
}

void DeadlineQueue::Clear() {
  heap_.clear();
  timer_.Stop();
  armed_for_ = Clock::time_point::max();
}

void DeadlineQueue::OnTimer() {
  armed_for_ = Clock::time_point::max();
  const auto now = Clock::now();
  // Entries added by fire_ for "now or earlier" are handled in this same pass.
  while (!heap_.empty() && heap_.front().first <= now) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    const Entry e = heap_.back();
    heap_.pop_back();
    fire_(e.second, e.first);
  }
  Arm();
}

void DeadlineQueue::Arm() {
  if (heap_.empty()) {
    timer_.Stop();
    armed_for_ = Clock::time_point::max();
    return;
  }
  armed_for_ = heap_.front().first;
  const auto ms =
      std::chrono::ceil<std::chrono::milliseconds>(armed_for_ - Clock::now()).count();
  timer_.Start(ms < 0 ? 0 : ms, [this] { OnTimer(); });
}

ResourceDeadlines::ResourceDeadlines(uv_loop_t* loop, Fire fire)
    : fire_(std::move(fire)),
      queue_(
          loop, [this](uint64_t serial, Clock::time_point due) { OnDue(serial, due); },
          [this](uint64_t serial, Clock::time_point due) {
            auto it = current_.find(serial);
            return it != current_.end() && it->second.due == due;
          },
          [this] { return current_.size(); }) {}

void ResourceDeadlines::Set(uint64_t serial, const std::string& name, Clock::time_point due) {
  if (closed_) return;
  auto [it, fresh] = current_.try_emplace(serial);
  if (fresh) it->second.name = name;
  it->second.due = due;
  queue_.Add(due, serial);
}

void ResourceDeadlines::Close() {
  closed_ = true;
  current_.clear();
  queue_.Clear();
}

void ResourceDeadlines::OnDue(uint64_t serial, Clock::time_point due) {
  auto it = current_.find(serial);
  if (it == current_.end() || it->second.due != due) return;  // gone, or moved to a later time
  const std::string name = std::move(it->second.name);
  current_.erase(it);
  fire_(serial, name);
}

}  // namespace lw
