#pragma once
// The state an in-place upgrade hands from the running agent to the next process
// (docs/upgrade.md), and its versioned forms: format 1, JSON (what 0.2.0 reads and writes), and
// format 2, binary (agent/handover_binary.h; the default, 50x faster at 100,000 holds). A new
// process says which formats it reads; the running one writes the newest both know, so an
// upgrade from 0.2.0 and a rollback to it both work. The file descriptors travel beside it
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

inline constexpr int kFormatJson = 1;
inline constexpr int kFormatBinary = 2;
// Format 2 after a pre-copy: PreCopy slices first, while the old process still serves; then the
// state, whose sessions keep their ids and carry HoldUpdates of what was pre-copied.
inline constexpr int kFormatPreCopied = 3;
// Format 3 with each hold's owner and depth (reentrant holds), in the pre-copy slices too.
inline constexpr int kFormatReentrant = 4;
inline constexpr int kFormat = kFormatReentrant;  // what this build writes unless told otherwise

// The formats this build reads and writes, oldest first.
std::vector<int> Formats();
// The format to write for a new process that said it reads `theirs` (its ready message's
// "formats", or [its "format"] from a build that sends only that): the newest one both know,
// or 0 when none.
int FormatFor(const std::vector<int>& theirs);
// Why a state of `format` is not taken.
std::string NotRead(int format);

// A request read but not yet answered that the next process asks again: its line as the client
// sent it, and how long ago it came (its wait_ms is shortened by that much).
struct PendingAsk {
  std::string line;
  int64_t age_ms = 0;
};

struct SessionState {
  uint64_t id = 0;  // format 3: the session's id, which the next process keeps
  int fd = -1;  // index into the descriptors handed beside the state
  std::string input;
  std::vector<HandedHold> holds;  // format 3: those not pre-copied
  std::vector<HoldUpdate> kept;  // format 3: its pre-copied holds that changed since, as now
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
  std::vector<HoldUpdate> kept;  // format 3, as SessionState::kept
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
  // Format 3: the pre-copied holds that ended since they were copied (HandedHold::serial).
  std::vector<uint64_t> gone;
};

// A slice of the holds, copied while the old process still serves (format 3): each with the
// session that holds it (a lease session's id is its uid's, core/session_id.h).
struct PreCopy {
  std::vector<std::pair<uint64_t, HandedHold>> holds;
  int format = kFormatPreCopied;  // the upgrade's (a slice of format 4 carries owner and depth)
};
std::string EncodePreCopy(const PreCopy& slice);
bool IsPreCopy(std::string_view text);
std::variant<PreCopy, std::string> DecodePreCopy(std::string_view text);

// The state in state.format (format 1 for any number but 2 and 3, so that a test can write one
// this build does not read).
std::string Encode(const State& state);
// The state, whichever format it is in, or why it cannot be taken (malformed, or a format this
// build does not read).
std::variant<State, std::string> Decode(std::string_view text);

// The request line asked again after age_ms: wait_ms shortened by the age (not below 0). A line
// without wait_ms, or not an object, is returned as it is.
std::string Aged(std::string_view line, int64_t age_ms);

}  // namespace lw::handover
