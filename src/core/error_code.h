#pragma once
// Machine-readable error codes shared by the engine, the wire protocol and the clients.
// A client branches on these; the accompanying message is for people.

#include <optional>
#include <string_view>

namespace lw {

enum class ErrorCode {
  kBadRequest,    // the request could not be understood or a field is out of range
  kTimeout,       // someone else held the resource for all of wait_ms
  kNoQuorum,      // too few masters answered to decide
  kNotHeld,       // that token does not hold that resource now
  kTooMany,       // a limit was reached (connections, waiters, in-flight requests...)
  kForbidden,     // the peer may not lock that resource
  kShuttingDown,  // the agent is stopping and takes no new work
  kInternal,      // a bug or an unexpected state: the agent logged it
  // The resource is in use as another kind (a mutex, a semaphore of another size, a read-write
  // lock) than the acquire asked for: nothing was granted.
  kKindMismatch,
  // The session asking already holds the resource so that this acquire would wait for its own
  // hold, which only it can release: refused at once instead of queued (nothing changed).
  kWouldDeadlock,
  // The admin HTTP API's own (docs/api.md):
  kUnauthorized,  // no admin token, or a wrong one
  kNotFound,      // no such endpoint
  kStale,         // what the action was about changed meanwhile; nothing was done
  kScannerOff,    // a scan was asked of an agent whose scanner is off
  kMasterError,   // a master could not be reached or answered with an error
  kUnavailable,   // the agent did not answer in time (stopping?)
  kStarting,      // the agent has not published its state yet
};

std::string_view ErrorCodeName(ErrorCode code);
std::optional<ErrorCode> ErrorCodeFromName(std::string_view name);

}  // namespace lw
