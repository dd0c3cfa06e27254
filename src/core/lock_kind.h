#pragma once
// Lock kinds and where each keeps its state on a master. Pure: the engine, the leak scanner and
// the fleet reader all read key shapes through this one file (docs/safety.md has the layout).
//
// P = key_prefix, R = resource name, US = '\x1f' (a control character: never part of a
// resource name, so no mutex's key can be mistaken for a part of another kind):
//   mutex (exclusive hold)  P R                       the holder's value, PX ttl
//   shared (read) holds     P R US "readers"          ZSET: reader value -> its expiry (the
//                                                     master's ms since the epoch); PX >= all
//                           P R (the readers' mark)   "lockwarden:readers", PX >= every reader's
//                                                     expiry, written by agents that mark
//                                                     readers (docs/safety.md §7): a plain
//                                                     SET NX of an exclusive hold fails on it
//                           P R US "writer-waiting"   an exclusive acquire refused because of
//                                                     readers: its value, PX a few retry delays;
//                                                     new readers are refused while it exists
//   semaphore of K          P R                       marker "lockwarden:semaphore:K", PX >=
//                                                     every permit's
//                           P R US "permit:" i        permit i (0 <= i < K), a mutex of its own
//   election                P R                       the leader's value (an exclusive hold,
//                                                     always fenced: its fence is the term)
//                           P R US "leader"           the leader's record (core/election_record.h),
//                                                     PX never beyond P R's; read only where P R
//                                                     still holds the value the record names
//   exclusive holds' turns  P R US "queue"             ZSET: agent (its value prefix) -> when its
//                                                     oldest waiter came (master ms): one entry
//                                                     per agent whose exclusive acquire was
//                                                     refused; PX >= every entry's expiry
//                           P R US "queue-alive"       ZSET: the same agents -> the entry's expiry
//                                                     (master ms), pushed on by every attempt
//                           P R (a reservation)        "lockwarden:reserved:" + an agent's value
//                                                     prefix, PX a short while: a release left
//                                                     the lock to that agent's next claim
// An exclusive acquire is the write hold of a read-write lock: it is refused while readers
// hold the resource, and readers while it is held. A semaphore's marker and a mutex's key are
// the same key, so a resource is never a mutex and a semaphore (or two sizes) at once.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lw {

// A mutex also takes shared (read) holds: it is a read-write lock.
// An election is a lock whose exclusive holder is the leader and keeps a record beside it.
enum class LockKind : uint8_t { kMutex, kSemaphore, kElection };

inline constexpr int kMaxPermits = 1024;
inline constexpr char kKeyPartSeparator = '\x1f';

// What a resource is: its kind, and for a semaphore how many permits it has.
struct LockShape {
  LockKind kind = LockKind::kMutex;
  int permits = 1;  // semaphores: K (1..kMaxPermits); 1 otherwise

  bool operator==(const LockShape&) const = default;
  // "lock", "semaphore of 4 permits", "election".
  std::string Describe() const;
  // Describe() after its indefinite article: "a lock", "an election".
  std::string WithArticle() const;
  // A semaphore's marker value at P R ("" for a mutex).
  std::string Marker() const;
};

// The readers' mark at P R (the layout above; kind_scripts.h spells it too). No hold.
inline constexpr std::string_view kReadersMark = "lockwarden:readers";

// A reservation at P R (the layout above): what a release leaves for `agent` (a value prefix).
std::string Reservation(std::string_view agent);
// Whether a value read at P R is a reservation (no hold: it holds the lock for an agent's claim).
bool IsReservation(std::string_view value);
// Whether a value read at P R stands for no holder of its own: a reservation or the readers'
// mark.
bool IsPlaceholder(std::string_view value);

// A semaphore's shape from its marker value; nullopt for anything else (a holder's value).
std::optional<LockShape> ShapeOfMarker(std::string_view value);

// What one hold is: the part of the resource it occupies.
enum class HoldMode : uint8_t { kExclusive, kShared, kPermit };
std::string_view NameOf(HoldMode mode);  // "exclusive", "shared", "permit"
std::string_view NameOf(LockKind kind);  // "mutex", "semaphore", "election"

// The keys of resource `name` under `prefix`.
std::string PermitKey(std::string_view prefix, std::string_view name, int permit);
std::string ReadersKey(std::string_view prefix, std::string_view name);
std::string WriterWaitingKey(std::string_view prefix, std::string_view name);
std::string LeaderKey(std::string_view prefix, std::string_view name);  // an election's record
std::string QueueKey(std::string_view prefix, std::string_view name);
std::string QueueAliveKey(std::string_view prefix, std::string_view name);
// The fence counter of a permit (an exclusive hold's is fence_prefix + name).
std::string PermitFenceKey(std::string_view fence_prefix, std::string_view name, int permit);

// A key under `prefix` read back: which resource and which part.
struct KeyPart {
  enum class Part : uint8_t {
    kBase, kPermit, kReaders, kWriterWaiting, kLeader, kQueue, kQueueAlive
  };
  std::string resource;
  Part part = Part::kBase;  // kBase: a mutex's key or a semaphore's marker (tell by the value)
  int permit = -1;          // kPermit only
};
// nullopt: not under prefix, or a part name this version does not know.
std::optional<KeyPart> ParseLockKey(std::string_view prefix, std::string_view key);

}  // namespace lw
