#pragma once
// ReleaseWatch: hears about releases of lock keys made by other agents, so a waiter backing off
// after "held by someone else" can try again at once instead of sleeping out its retry delay.
// Every release script publishes the key on scripts::ReleaseChannel(key) on each master.
// Best effort by design: a missed announcement only means the waiter retries on its timer.

#include <string>

namespace lw {

class ReleaseWatch {
 public:
  virtual ~ReleaseWatch() = default;
  // Listen for releases of `key` on every master until as many Unwatch(key) as Watch(key)
  // calls came: calls are counted, so several users (the engine's waiters, the agent's
  // election observers) may watch one key, each with balanced calls. An Unwatch of a key not
  // watched is ignored. Loop thread only.
  virtual void Watch(const std::string& key) = 0;
  virtual void Unwatch(const std::string& key) = 0;
};

}  // namespace lw
