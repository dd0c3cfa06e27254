#pragma once
// The parts of a resource's state on a master (core/lock_kind.h has the layout), as one table:
// for each part, how its value is stored, whether it holds holds, how a reader lists them, how
// one hold is checked, and how one is removed. Pure: commands are words, and a removal names
// its script (redis/scripts.h and redis/kind_scripts.h have the texts). The leak scanner, the
// presence probe, the fleet reader and the fleet revoke read and remove parts through it.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/lock_kind.h"

namespace lw {

// How a part stores its value.
enum class PartValue : uint8_t {
  kString,   // one value: GET
  kMembers,  // a ZSET: each member a hold's value, its score the hold's expiry (master ms)
};

// Which of a part's values are holds.
enum class PartHolds : uint8_t {
  kEvery,         // each value is one hold (a string part's reservation is none: IsReservation)
  kUnlessMarker,  // each value but a semaphore's marker (ShapeOfMarker), or a reservation
  kNone,          // a mark or a description of the hold beside it: expires with it, never
                  // revoked by itself
};

// How one hold is removed from a master. Every removal compares first, so a hold granted
// again with another value is untouched, and announces the release on the resource's channel.
enum class PartRemoval : uint8_t {
  kNone,              // not a hold
  kDeleteWithRecord,  // DEL of the key when it holds the value; first, DEL of the election's
                      // leader record (P R US "leader") when the record names that value
  kDeleteIfValue,     // DEL of the key when it holds the value
  kRemoveMember,      // ZREM of the member
};

struct KeyPartRow {
  KeyPart::Part part;
  std::string_view name;  // "base", "permit", "readers", "writer-waiting", "leader", "queue"...
  PartValue value;
  PartHolds holds;
  HoldMode mode;  // of a hold in this part
  PartRemoval removal;
};

// Every part, in KeyPart::Part order.
std::span<const KeyPartRow> KeyPartRows();
const KeyPartRow& RowOf(KeyPart::Part part);
// The row of a key under `prefix` ("" reads any prefix: the separator never occurs in a
// resource name); null when it is not a lock key of a part this version knows.
const KeyPartRow* RowOfKey(std::string_view prefix, std::string_view key);
// The row a reader reads `key` by: RowOfKey, and for a key of a part this version does not
// know the base key's (a string, as every part but the readers set).
const KeyPartRow& RowToRead(std::string_view prefix, std::string_view key);
// The key of `part` of its resource under `prefix` (ParseLockKey's inverse).
std::string KeyOfPart(std::string_view prefix, const KeyPart& part);

// Whether `value`, read from a part of `row`, is a hold.
bool IsHold(const KeyPartRow& row, std::string_view value);
// The Redis type of the part's key as TYPE names it: "string" or "zset".
std::string_view RedisTypeOf(const KeyPartRow& row);

using CommandWords = std::vector<std::string>;

// The command listing the holds at `key`: GET, or for members ZRANGE key 0 max-1, WITHSCORES
// when `scores` (member, score, member, score...).
CommandWords ListCommand(const KeyPartRow& row, const std::string& key, int64_t max_members,
                         bool scores);
// The command telling whether hold `value` is still at `key`: GET, or ZSCORE key value.
CommandWords CheckCommand(const KeyPartRow& row, const std::string& key, const std::string& value);
// Whether a string answer `text` to CheckCommand means `value` is held: GET must answer the
// value itself, ZSCORE any score. A nil answer always means it is not.
bool CheckAnswerHolds(const KeyPartRow& row, std::string_view text, std::string_view value);

// The scripts removals run (texts: kDeleteIfHeld and kDeleteWithRecord in redis/scripts.h,
// kReleaseShared in redis/kind_scripts.h).
enum class RemovalScript : uint8_t { kDeleteIfHeld, kDeleteWithRecord, kReleaseShared };
struct RemovalCommand {
  RemovalScript script = RemovalScript::kDeleteIfHeld;
  std::vector<std::string> keys;
  std::vector<std::string> args;  // ARGV: the value, then the channel
};
// How to remove hold `value` from `part` of its resource under `prefix`, announcing on
// `channel` ("": announce nothing); nullopt when the part holds no holds.
std::optional<RemovalCommand> RemovalOf(std::string_view prefix, const KeyPart& part,
                                        const std::string& value, const std::string& channel);
// EVAL's words after the script text: the key count, the keys, the args.
CommandWords EvalTail(const RemovalCommand& removal);

}  // namespace lw
