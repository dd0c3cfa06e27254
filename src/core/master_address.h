#pragma once
// Where a Redis master is and how to log in to it. Pure data: config/ parses it from a URL,
// redis/ connects with it.

#include <string>

namespace lw {

struct MasterAddress {
  std::string host;
  int port = 6379;
  std::string user;      // empty: no ACL user (AUTH password only, if password set)
  std::string password;  // empty: no AUTH. Never logged.
  // "host:port" ("[v6]:port" for an IPv6 host) — safe to log and show (no credentials).
  std::string Display() const;
};

}  // namespace lw
