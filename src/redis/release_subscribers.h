#pragma once
// ReleaseSubscribers: the ReleaseWatch the agent runs, one Subscriber per master. A key is
// watched on every master, so one release is usually heard once per master that applied it;
// a master that is down or refuses the subscription costs nothing but its share of the
// announcements. Connections exist only while some key is watched (see Subscriber).
//
// Channels listened to for as long as the agent runs (Listen: the fleet's revoke orders) have
// connections of their own, one per master: a master whose ACL refuses such a channel (the
// refused SUBSCRIBE closes its connection) then costs nothing to the release announcements,
// which stay lazy.

#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/master_address.h"
#include "redis/release_watch.h"
#include "redis/subscriber.h"

namespace lw {

class ReleaseSubscribers final : public ReleaseWatch {
 public:
  // Called on the loop thread with the lock key of every release heard on a watched key,
  // once per master that announced it.
  using ReleaseHandler = std::function<void(const std::string& key)>;

  ReleaseSubscribers(uv_loop_t* loop, const std::vector<MasterAddress>& masters,
                     SubscriberOptions options, ReleaseHandler on_release);

  void Watch(const std::string& key) override;
  void Unwatch(const std::string& key) override;
  // Called on the loop thread with the payload of every message on a channel listened to, once
  // per master that delivered it.
  using ChannelHandler = std::function<void(const std::string& message)>;
  // Listens to `channel` on every master from now until Stop (e.g. the fleet's revoke channel
  // of this agent: fleet::RevokeChannel), on the listening connections (opened by the first
  // Listen). carries / refusal_means: for the log (SubscriberOptions). A second Listen of a
  // channel replaces its handler.
  void Listen(const std::string& channel, ChannelHandler handler, std::string carries,
              std::string refusal_means);
  // Closes every connection for good; Watch and Unwatch are no-ops afterwards.
  void Stop();

 private:
  uv_loop_t* loop_;
  std::vector<MasterAddress> masters_;
  SubscriberOptions options_;
  ReleaseHandler on_release_;
  std::map<std::string, ChannelHandler> listened_;
  std::map<std::string, int> watches_;  // key -> Watch calls not yet balanced by Unwatch
  std::vector<std::unique_ptr<Subscriber>> subscribers_;  // release announcements, lazy
  std::vector<std::unique_ptr<Subscriber>> listeners_;    // Listen's channels
  bool stopped_ = false;
};

}  // namespace lw
