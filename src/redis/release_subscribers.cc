#include "redis/release_subscribers.h"

#include "redis/scripts.h"

namespace lw {

ReleaseSubscribers::ReleaseSubscribers(uv_loop_t* loop, const std::vector<MasterAddress>& masters,
                                       SubscriberOptions options, ReleaseHandler on_release)
    : loop_(loop), masters_(masters), options_(options), on_release_(std::move(on_release)) {
  for (const auto& m : masters) {
    subscribers_.push_back(std::make_unique<Subscriber>(
        loop, m, options, [this](const std::string& channel, const std::string&) {
          if (auto key = scripts::ReleasedKey(channel)) on_release_(*key);
        }));
  }
}

void ReleaseSubscribers::Watch(const std::string& key) {
  if (stopped_ || ++watches_[key] > 1) return;
  const std::string channel = scripts::ReleaseChannel(key);
  for (auto& s : subscribers_) s->Subscribe(channel);
}

void ReleaseSubscribers::Unwatch(const std::string& key) {
  auto it = watches_.find(key);
  if (it == watches_.end()) return;
  if (--it->second > 0) return;
  watches_.erase(it);
  const std::string channel = scripts::ReleaseChannel(key);
  for (auto& s : subscribers_) s->Unsubscribe(channel);
}

void ReleaseSubscribers::Listen(const std::string& channel, ChannelHandler handler,
                                std::string carries, std::string refusal_means) {
  if (stopped_) return;
  listened_[channel] = std::move(handler);
  if (listeners_.empty()) {
    SubscriberOptions options = options_;
    options.carries = std::move(carries);
    options.refusal_means = std::move(refusal_means);
    for (const auto& m : masters_) {
      listeners_.push_back(std::make_unique<Subscriber>(
          loop_, m, options, [this](const std::string& heard, const std::string& message) {
            auto it = listened_.find(heard);
            if (it == listened_.end()) return;
            const ChannelHandler on_message = it->second;  // a copy: it may Listen again
            on_message(message);
          }));
    }
  }
  for (auto& s : listeners_) s->Subscribe(channel);
}

void ReleaseSubscribers::Stop() {
  stopped_ = true;
  for (auto& s : subscribers_) s->Stop();
  for (auto& s : listeners_) s->Stop();
  listened_.clear();
  watches_.clear();
}

}  // namespace lw
