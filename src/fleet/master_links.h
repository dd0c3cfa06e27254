#pragma once
// MasterLinks: one blocking connection per master for a fleet thread (presence, reader, revoke),
// opened when first needed and again after a failure, each master's failure logged once until
// it works again. Not thread-safe: one thread owns it.

#include <chrono>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/master_address.h"
#include "redis/blocking_connection.h"

namespace lw::fleet {

class MasterLinks {
 public:
  // activity: what the connections are for, in log lines ("fleet heartbeat").
  MasterLinks(std::vector<MasterAddress> masters, std::chrono::milliseconds connect_timeout,
              std::chrono::milliseconds command_timeout, std::string activity);

  size_t size() const { return masters_.size(); }
  std::string Display(size_t i) const { return masters_[i].Display(); }

  // Sends `commands` to master i in one pipeline (connecting first if needed) and returns the
  // replies in order, error replies included; or a human error, after which the connection is
  // dropped and the failure recorded (Failed).
  std::variant<std::vector<Reply>, std::string> Pipeline(size_t i,
                                                          const std::vector<Command>& commands);
  // Records that master i failed (logged when it was working) or worked (logged when it was
  // failing). A reply of NOPERM is logged with the ACL the fleet needs.
  void Failed(size_t i, const std::string& error);
  void Worked(size_t i);
  bool failing(size_t i) const { return links_[i].failing; }

 private:
  struct Link {
    std::unique_ptr<BlockingConnection> conn;
    bool failing = false;
  };
  std::vector<MasterAddress> masters_;
  std::chrono::milliseconds connect_timeout_, command_timeout_;
  std::string activity_;
  std::vector<Link> links_;
};

// The first error reply among `replies` ("" when none): a master that refuses a fleet command
// (an ACL without the lockwarden:* keys, say) is a failing master.
std::string FirstError(const std::vector<Reply>& replies);

}  // namespace lw::fleet
