#pragma once
// Format 2 of the hand-over state (agent/handover_state.h): the same fields as format 1's JSON,
// written as a flat binary record so that 100,000 holds encode and decode in tens of
// milliseconds instead of seconds (format 1 builds a JSON tree of ~1.3 million nodes).
//
//   "LWHS" u32:format  then the State's fields in declaration order (format 3 adds each
//   session's id, each hold's serial, each session's and lease's HoldUpdates, and `gone`);
//   integers little-endian fixed width (i32, i64, u8 for booleans), a string is u32 length +
//   bytes, a list is u32 count + items; kind and mode by name (core/lock_kind.h), so that a
//   renumbered enum cannot change a hold's meaning between builds.
//
// Pure: no I/O.

#include <string>
#include <string_view>
#include <variant>

#include "agent/handover_state.h"

namespace lw::handover {

inline constexpr std::string_view kBinaryMagic = "LWHS";
// A PreCopy slice: "LWPC", then (from format 4) i32 -format, then a list of (u64 session, hold
// with its serial, written as the format says).
inline constexpr std::string_view kPreCopyMagic = "LWPC";

bool IsBinary(std::string_view text);
std::string EncodeBinary(const State& state);
// The state, or why not (truncated, trailing bytes, a format other than kFormatBinary).
std::variant<State, std::string> DecodeBinary(std::string_view text);

}  // namespace lw::handover
