#pragma once
// An election's leader record (core/lock_kind.h: P R US "leader"), as stored and as read.
// Pure.
//
// Stored: "<value>" US "<term>" US "<since>" US "<payload>", where value is the leader's hold
// value on the masters (so a record is only ever read where P R still holds that value: the
// read script strips it and answers the rest, or nil), term the grant's fence, since the Unix
// ms of the grant on the granting agent's clock, and payload what the campaign said of itself
// (a JSON object built by the agent: the candidate's value, agent, host, pid).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lw {

struct ElectionRecord {
  int64_t term = 0;
  int64_t since_ms = 0;  // Unix ms
  std::string payload;

  bool operator==(const ElectionRecord&) const = default;
};

// What the record key holds for a leader whose hold value is `value`.
std::string StoredRecord(std::string_view value, const ElectionRecord& record);

// A record as the read script answers it (the value already stripped): nullopt when it is not
// "<term>" US "<since>" US "<payload>" with whole numbers >= 0 (a term is >= 1).
std::optional<ElectionRecord> ParseReadRecord(std::string_view text);

// A record as the record key holds it (StoredRecord's text), for views of the hold beside it:
// the hold value it names, and the rest as ParseReadRecord reads it. nullopt when malformed
// (the key is read back from the masters: untrusted).
struct StoredElectionRecord {
  std::string value;
  ElectionRecord record;
};
std::optional<StoredElectionRecord> ParseStoredRecord(std::string_view stored);

}  // namespace lw
