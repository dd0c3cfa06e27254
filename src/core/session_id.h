#pragma once
// SessionId: one client connection of the agent, from accept to close. Unique for the life of
// the agent process (never reused), so a stale id names nobody rather than somebody else.

#include <cstdint>

namespace lw {

using SessionId = uint64_t;

}  // namespace lw
