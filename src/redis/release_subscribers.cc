#include "redis/release_subscribers.h"

#include "redis/scripts.h"

namespace lw {

ReleaseSubscribers::ReleaseSubscribers(uv_loop_t* loop, const std::vector<MasterAddress>& masters,
                                       SubscriberOptions options, ReleaseHandler on_release)
    : on_release_(std::move(on_release)) {
  for (const auto& m : masters) {
    subscribers_.push_back(
        std::make_unique<Subscriber>(loop, m, options,
                                     [this](const std::string& channel, const std::string& message) {
                                       OnMessage(channel, message);
                                     }));
  }
}

void ReleaseSubscribers::OnMessage(const std::string& channel, const std::string& message) {
  if (auto it = listened_.find(channel); it != listened_.end()) {
    const ChannelHandler handler = it->second;  // a copy: the handler may Listen again
    handler(message);
    return;
  }
  if (auto key = scripts::ReleasedKey(channel)) on_release_(*key);
}

void ReleaseSubscribers::Listen(const std::string& channel, ChannelHandler handler) {
  listened_[channel] = std::move(handler);
  for (auto& s : subscribers_) s->Subscribe(channel);
}

void ReleaseSubscribers::Watch(const std::string& key) {
  const std::string channel = scripts::ReleaseChannel(key);
  for (auto& s : subscribers_) s->Subscribe(channel);
}

void ReleaseSubscribers::Unwatch(const std::string& key) {
  const std::string channel = scripts::ReleaseChannel(key);
  for (auto& s : subscribers_) s->Unsubscribe(channel);
}

void ReleaseSubscribers::Stop() {
  for (auto& s : subscribers_) s->Stop();
  listened_.clear();
}

}  // namespace lw
