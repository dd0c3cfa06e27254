#include "redis/release_subscribers.h"

#include "redis/scripts.h"

namespace lw {

ReleaseSubscribers::ReleaseSubscribers(uv_loop_t* loop, const std::vector<MasterAddress>& masters,
                                       SubscriberOptions options, ReleaseHandler on_release)
    : on_release_(std::move(on_release)) {
  for (const auto& m : masters) {
    subscribers_.push_back(
        std::make_unique<Subscriber>(loop, m, options, [this](const std::string& channel) {
          if (auto key = scripts::ReleasedKey(channel)) on_release_(*key);
        }));
  }
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
}

}  // namespace lw
