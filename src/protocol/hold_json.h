#pragma once
// A hold (core/hold.h) on every wire that carries one: one writer of its fields and one reader.
//   socket  the `locks` reply (docs/protocol.md)
//   report  an agent's holder report on the masters (docs/fleet.md), read back by other
//           agents, older and newer
//   admin   the locks of /api/v1/state (docs/api.md)
//   fleet   a row of /api/v1/fleet and /api/v1/fleet/who (docs/api.md)
// Where the wires differ:
// - which fields each carries (named with each field in hold_json.cc; a field without a list of
//   wires is on every wire);
// - the socket and the report are compact: a field its readers take as absent is left out while
//   it is at its default ("mode" exclusive, "detached" false, a permit's numbers on other holds),
//   so that a reader that does not know the field reads the hold as it would without it; the
//   admin and fleet wires write every field they carry, null where it has no value;
// - held time: the report writes held since, the socket and the admin API how long by this
//   agent's clock (LockView::held_ms), the fleet both (how long at the fleet read).
// Keys come in one order on every wire (the report's are sorted when it is written).

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>

#include "core/election_record.h"
#include "core/hold.h"
#include "core/lock_view.h"
#include "protocol/json_fields.h"

namespace lw::protocol {

enum class HoldWire : uint8_t { kSocket, kReport, kAdmin, kFleet };

// Bounds of a reported hold: longer is cut when written, refused when read.
inline constexpr size_t kMaxReportedResourceBytes = 1024;
inline constexpr size_t kMaxReportedCmdlineBytes = 200;

// `hold` as `wire` carries it: the report and fleet wires (a hold not held through this agent).
// at_unix_ms: the fleet wire's time of the read (its held_ms); the other wires ignore it.
nlohmann::ordered_json HoldJson(const Hold& hold, HoldWire wire, int64_t at_unix_ms = 0);
// A hold held through this agent (the socket and admin wires): with its session, how long it is
// held and still valid, and how many holds of its resource this agent has.
nlohmann::ordered_json HoldJson(const LockView& lock, HoldWire wire);

// A hold of a holder report, as HoldJson wrote it for the report (or an older agent did:
// absent fields are an exclusive hold, not detached). Not ok() when a field is missing, of the
// wrong type or out of bounds: an unknown mode, a permit out of [0, permits), a K out of
// [1, kMaxPermits].
Hold ReadHold(JsonFields& f);

// A hold's or a waiter's mode as the report reads it: absent is exclusive; a permit's K is
// read into `permits`, and its index into `*permit` unless permit is null (a waiter has none).
void ReadMode(JsonFields& f, HoldMode& mode, int& permits, int* permit);

// An election's leader as its record says: {"term", "since_unix_ms", and from the campaign's
// payload "value", "agent", "host", "pid" (null where the payload has no such field of the
// right type: it is read back from the masters, untrusted)}.
nlohmann::ordered_json LeaderJson(const ElectionRecord& record);

}  // namespace lw::protocol
