#pragma once
// The state an in-place upgrade hands from the running agent to the next process
// (agent/upgrade.h), and its versioned JSON form. The file descriptors travel beside it
// (agent/fd_passing.h); the state names them by their index in that list. Pure: no I/O.
//
// Format 1: {"format":1, "version", "agent_id", "masters", "key_prefix", "fence_prefix",
//   "listener": fd index,
//   "sessions": [{"fd", "input": unread bytes of a partial line, "holds": [hold], "asks":
//   [{"line", "age_ms"}] (acquires and campaigns waiting, to be asked again), "observed":
//   [name], "upgrade_id"}], "previous_pid", "held_since_ns", "leases": [{"uid", "holds": [hold], "creators": [{"resource", "token", "pid",
//   "uid", "gid", "cmdline"}]}]}
// hold: {"resource", "token", "value", "ttl_ms", "renew", "fence"?, "kind", "permits", "mode",
//   "part", "note"?, "acquired_ns", "valid_until_ns": CLOCK_MONOTONIC}.
// A reader refuses any other format: the running agent then keeps serving.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/hold.h"
#include "locking/holder.h"

namespace lw::handover {

inline constexpr int kFormat = 1;

// A request read but not yet answered that the next process asks again: its line as the client
// sent it, and how long ago it came (its wait_ms is shortened by that much).
struct PendingAsk {
  std::string line;
  int64_t age_ms = 0;
};

struct SessionState {
  int fd = -1;  // index into the descriptors handed beside the state
  std::string input;
  std::vector<HandedHold> holds;
  std::vector<PendingAsk> asks;
  std::vector<std::string> observed;
  std::string upgrade_id;  // its upgrade request's id (JSON), answered by the new process; ""
};

struct LeaseCreator {
  std::string resource;
  std::string token;
  Peer creator;
};

struct LeaseState {
  uid_t uid = 0;
  std::vector<HandedHold> holds;
  std::vector<LeaseCreator> creators;
};

struct State {
  int format = kFormat;
  std::string version;
  std::string agent_id;
  // What the holds depend on: the new process refuses to take them over if any differs.
  std::vector<std::string> masters;
  std::string key_prefix, fence_prefix;
  int listener = -1;
  int previous_pid = 0;
  // When the old process held its requests (CLOCK_MONOTONIC ns): the hand-over's start.
  int64_t held_since_ns = 0;
  std::vector<SessionState> sessions;
  std::vector<LeaseState> leases;
};

std::string Encode(const State& state);
// The state, or why it cannot be taken (malformed, or a format this build does not read).
std::variant<State, std::string> Decode(std::string_view text);

// The request line asked again after age_ms: wait_ms shortened by the age (not below 0). A line
// without wait_ms, or not an object, is returned as it is.
std::string Aged(std::string_view line, int64_t age_ms);

}  // namespace lw::handover
