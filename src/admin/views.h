#pragma once
// JSON views of agent state for the admin API (docs/api.md). Pure: no I/O, no clock reads.

#include <nlohmann/json.hpp>

#include <string>

#include "agent/snapshot.h"
#include "scan/leak_scanner.h"

namespace lw {

// "2026-11-20T10:00:00.123Z"
std::string IsoTime(int64_t unix_ms);

nlohmann::ordered_json StateView(const Snapshot& snapshot);
// report null: the first pass has not finished yet. interval_ms 0: the scanner is off.
nlohmann::ordered_json LeaksView(const ScanReport* report, int64_t interval_ms);

// {"ok":false,"error":"<code>","message":"<for people>"}, the shape of socket errors too.
nlohmann::ordered_json ErrorView(std::string_view code, std::string_view message);

// Serializes with invalid UTF-8 (binary Redis keys) replaced rather than throwing.
std::string Dump(const nlohmann::ordered_json& json);

}  // namespace lw
