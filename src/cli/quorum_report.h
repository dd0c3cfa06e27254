#pragma once
// The quorum as the CLI reports it, from the agent's `health` reply, by the rule every front
// uses (core/quorum_state.h): `lockwarden status`, and the word a command that waits for a
// quorum says at once.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "client/client.h"
#include "core/quorum_state.h"

namespace lw::cli {

// The counts of a `health` reply: its nodes (up; usable when up and not quarantined) and
// quorum.
QuorumCounts QuorumOfHealth(const nlohmann::json& health);

// "at_risk, margin 1 (1 more master may stop before locking stops)": the state's word, its
// margin, and what they mean for locking.
std::string QuorumVerdict(const QuorumCounts& counts);

// For a request that waits for a quorum of masters as it waits for a busy lock (lock, acquire
// --detach, elect): asks the agent's health on c and, when too few masters are usable, says on
// stderr at once that `doing` waits for a quorum, why (the counts), and for how long: wait_ms
// (--wait), or the agent's max_wait_ms when wait_ms < 0. Throws client::ClientError as c does.
void SayIfWaitingForQuorum(client::Client& c, const std::string& doing, int64_t wait_ms);

}  // namespace lw::cli
