#include "core/key_parts.h"

#include <array>

namespace lw {
namespace {

using Part = KeyPart::Part;

// An election's base key is an exclusive hold like a mutex's: the kind is not in the key, so
// every base key's removal also drops a leader record that names the removed value.
constexpr std::array<KeyPartRow, 7> kRows = {{
    {Part::kBase, "base", PartValue::kString, PartHolds::kUnlessMarker, HoldMode::kExclusive,
     PartRemoval::kDeleteWithRecord},
    {Part::kPermit, "permit", PartValue::kString, PartHolds::kEvery, HoldMode::kPermit,
     PartRemoval::kDeleteIfValue},
    {Part::kReaders, "readers", PartValue::kMembers, PartHolds::kEvery, HoldMode::kShared,
     PartRemoval::kRemoveMember},
    {Part::kWriterWaiting, "writer-waiting", PartValue::kString, PartHolds::kNone,
     HoldMode::kExclusive, PartRemoval::kNone},
    {Part::kLeader, "leader", PartValue::kString, PartHolds::kNone, HoldMode::kExclusive,
     PartRemoval::kNone},
    // Turns (docs/safety.md, "Fair turns"): agents waiting, never a hold; each entry expires
    // unless its agent's attempts push it on, and the key with the last of them.
    {Part::kQueue, "queue", PartValue::kMembers, PartHolds::kNone, HoldMode::kExclusive,
     PartRemoval::kNone},
    {Part::kQueueAlive, "queue-alive", PartValue::kMembers, PartHolds::kNone,
     HoldMode::kExclusive, PartRemoval::kNone},
}};

constexpr bool InPartOrder() {
  for (size_t i = 0; i < kRows.size(); ++i) {
    if (static_cast<size_t>(kRows[i].part) != i) return false;
  }
  return true;
}
static_assert(InPartOrder(), "kRows is indexed by KeyPart::Part");

}  // namespace

std::span<const KeyPartRow> KeyPartRows() { return kRows; }

const KeyPartRow& RowOf(KeyPart::Part part) { return kRows[static_cast<size_t>(part)]; }

const KeyPartRow* RowOfKey(std::string_view prefix, std::string_view key) {
  const std::optional<KeyPart> part = ParseLockKey(prefix, key);
  return part ? &RowOf(part->part) : nullptr;
}

const KeyPartRow& RowToRead(std::string_view prefix, std::string_view key) {
  const KeyPartRow* row = RowOfKey(prefix, key);
  return row ? *row : RowOf(Part::kBase);
}

std::string KeyOfPart(std::string_view prefix, const KeyPart& part) {
  switch (part.part) {
    case Part::kBase:
      return std::string(prefix) + part.resource;
    case Part::kPermit:
      return PermitKey(prefix, part.resource, part.permit);
    case Part::kReaders:
      return ReadersKey(prefix, part.resource);
    case Part::kWriterWaiting:
      return WriterWaitingKey(prefix, part.resource);
    case Part::kLeader:
      return LeaderKey(prefix, part.resource);
    case Part::kQueue:
      return QueueKey(prefix, part.resource);
    case Part::kQueueAlive:
      return QueueAliveKey(prefix, part.resource);
  }
  return std::string(prefix) + part.resource;
}

bool IsHold(const KeyPartRow& row, std::string_view value) {
  if (row.value == PartValue::kString && IsPlaceholder(value)) return false;
  switch (row.holds) {
    case PartHolds::kEvery:
      return true;
    case PartHolds::kUnlessMarker:
      return !ShapeOfMarker(value) && !IsPlaceholder(value);
    case PartHolds::kNone:
      return false;
  }
  return false;
}

std::string_view RedisTypeOf(const KeyPartRow& row) {
  return row.value == PartValue::kMembers ? "zset" : "string";
}

CommandWords ListCommand(const KeyPartRow& row, const std::string& key, int64_t max_members,
                         bool scores) {
  if (row.value == PartValue::kString) return {"GET", key};
  CommandWords words = {"ZRANGE", key, "0", std::to_string(max_members - 1)};
  if (scores) words.push_back("WITHSCORES");
  return words;
}

CommandWords CheckCommand(const KeyPartRow& row, const std::string& key, const std::string& value) {
  if (row.value == PartValue::kMembers) return {"ZSCORE", key, value};
  return {"GET", key};
}

bool CheckAnswerHolds(const KeyPartRow& row, std::string_view text, std::string_view value) {
  return row.value == PartValue::kMembers || text == value;
}

std::optional<RemovalCommand> RemovalOf(std::string_view prefix, const KeyPart& part,
                                        const std::string& value, const std::string& channel) {
  RemovalCommand out;
  out.keys = {KeyOfPart(prefix, part)};
  out.args = {value, channel};
  switch (RowOf(part.part).removal) {
    case PartRemoval::kNone:
      return std::nullopt;
    case PartRemoval::kDeleteWithRecord:
      out.script = RemovalScript::kDeleteWithRecord;
      out.keys.push_back(LeaderKey(prefix, part.resource));
      break;
    case PartRemoval::kDeleteIfValue:
      out.script = RemovalScript::kDeleteIfHeld;
      break;
    case PartRemoval::kRemoveMember:
      out.script = RemovalScript::kReleaseShared;
      out.keys.push_back(std::string(prefix) + part.resource);  // P R: the readers' mark
      break;
  }
  return out;
}

CommandWords EvalTail(const RemovalCommand& removal) {
  CommandWords words = {std::to_string(removal.keys.size())};
  words.insert(words.end(), removal.keys.begin(), removal.keys.end());
  words.insert(words.end(), removal.args.begin(), removal.args.end());
  return words;
}

}  // namespace lw
