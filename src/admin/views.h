#pragma once
// JSON views of agent state for the admin API (docs/api.md). Pure: no I/O, no clock reads.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "core/defaults.h"
#include "core/result.h"
#include "observe/recent.h"
#include "observe/snapshot.h"
#include "scan/leak_scanner.h"
#include "scan/presence_probe.h"

namespace lw {

// "2026-11-20T10:00:00.123Z"
std::string IsoTime(int64_t unix_ms);

// Facts about the agent process that do not change while it runs.
struct AgentFacts {
  std::string version;
  int pid = 0;
  int64_t started_unix_ms = 0;
  std::string socket;
};

// Everything GET /api/v1/state shows. Only `snapshot` is required.
struct StateInputs {
  const Snapshot* snapshot = nullptr;
  AgentFacts agent;
  std::string agent_id;    // this run's fleet id ("" when fleet presence is off)
  std::string agent_name;  // agent_name
  bool actions_enabled = false;
  int64_t max_ttl_ms = 0;  // the largest TTL an operator may set on a leaked key
  int64_t stuck_after_ms = kDefaultStuckAfterMs;
  const ScanReport* leaks = nullptr;  // null: no pass finished yet (or the scanner is off)
  int64_t scan_interval_ms = 0;       // 0: the scanner is off
  const PresenceReport* presence = nullptr;
  std::vector<Event> events;          // newest first
  std::vector<HistoryPoint> history;  // oldest first
};

nlohmann::ordered_json StateView(const StateInputs& in);
// The snapshot alone (the other sections empty).
nlohmann::ordered_json StateView(const Snapshot& snapshot);
// report null: the first pass has not finished yet. interval_ms 0: the scanner is off.
nlohmann::ordered_json LeaksView(const ScanReport* report, int64_t interval_ms);

// Why a lock counts as stuck ("" if it does not): held longer than stuck_after, or not
// renewed with a ttl longer than stuck_after.
std::string StuckReason(const LockView& lock, int64_t stuck_after_ms);

// What the page tells an operator when actions are disabled.
extern const char* const kHowToEnableActions;

// {"ok":false,"error":"<code>","message":"<for people>"}, the shape of socket errors too.
nlohmann::ordered_json ErrorView(const Failure& failure);

// Serializes with invalid UTF-8 (binary Redis keys) replaced rather than throwing.
std::string Dump(const nlohmann::ordered_json& json);

}  // namespace lw
