#pragma once
// Waiters: the acquire requests queued for one resource inside this agent, first come first
// served. Only the front contends on the masters; the others wait for it to be answered.
//
// A waiter whose session closed, or whose wait ran out, while its attempt is in flight stays
// at the front, marked, until the attempt ends (the attempt's result must be undone or
// answered). Everything else is removed at once.

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "core/lock_kind.h"
#include "core/result.h"
#include "core/session_id.h"
#include "locking/failure_text.h"

namespace lw {

struct Grant {
  std::string token;
  int64_t validity_ms;  // left as the grant is answered (always > 0)
  int64_t waited_ms;
  std::optional<int64_t> fence;  // fenced acquires only
  int permit = -1;               // semaphores: which permit (0..K-1)
  HoldMode mode = HoldMode::kExclusive;
  uint64_t hold = 0;  // the hold's id in this engine (LockView::hold); never reused
  int depth = 0;      // a reentrant hold's acquires (0: the acquire did not ask for reentrancy)
};

using AcquireDone = std::function<void(const std::variant<Grant, Failure>&)>;

struct Waiter {
  using Clock = std::chrono::steady_clock;

  uint64_t id = 0;
  SessionId session = 0;
  bool renew = false;
  HoldMode mode = HoldMode::kExclusive;  // the part it asks for (Kind::ModeAsked)
  SessionId hold_as = 0;  // AcquireKind::hold_as
  std::string payload;    // AcquireKind::payload
  uint64_t owner = 0;     // AcquireKind::owner
  bool reentrant = false; // AcquireKind::reentrant
  Clock::time_point requested, deadline;
  AcquireDone done;
  bool in_attempt = false;
  bool cancelled = false;  // its session closed while its attempt was in flight
  bool expired = false;    // wait_ms ran out while its attempt was in flight
  AttemptHistory history;  // ttl_ms, wait_ms, fence and what its attempts came to
};

// Every waiter queued in the WaitQueues attached to it, oldest request first: counts them and
// lists the oldest without a walk over every resource (ResourceTable::AllWaiters). A waiter's
// requested and id do not change while it is queued.
class WaiterIndex {
 public:
  struct Entry {
    Waiter::Clock::time_point requested;
    uint64_t id;
    const Waiter* waiter;
    const std::string* name;  // its resource's, as the table keys it
    bool operator<(const Entry& o) const {
      return requested != o.requested ? requested < o.requested : id < o.id;
    }
  };
  void Add(const Waiter& w, const std::string* name) { entries_.insert({w.requested, w.id, &w, name}); }
  void Remove(const Waiter& w) { entries_.erase(Entry{w.requested, w.id, nullptr, nullptr}); }
  size_t size() const { return entries_.size(); }
  const std::set<Entry>& entries() const { return entries_; }

 private:
  std::set<Entry> entries_;
};

class WaitQueue {
 public:
  using Forget = std::function<void(const Waiter&)>;

  // From now on every waiter pushed or removed here is added to or removed from `index`, under
  // `name` (which must outlive the queue). Only while the queue is empty.
  void Attach(WaiterIndex* index, const std::string* name) {
    index_ = index;
    name_ = name;
  }

  bool empty() const { return waiters_.empty(); }
  size_t size() const { return waiters_.size(); }
  // Waiters that still want an answer (not cancelled).
  size_t live() const;
  Waiter& front() { return waiters_.front(); }
  const Waiter& front() const { return waiters_.front(); }

  void Push(Waiter w) {
    waiters_.push_back(std::move(w));
    if (index_ != nullptr) index_->Add(waiters_.back(), name_);
  }
  Waiter PopFront();
  // Drops cancelled waiters from the front that have no attempt in flight; `forget` sees each.
  void DropCancelledFront(const Forget& forget);
  // The waiter with this id, or null.
  Waiter* Find(uint64_t id);
  // Removes the waiter with this id (not the front) and returns it.
  std::optional<Waiter> Take(uint64_t id);
  // Removes every waiter of `session` (the front is only marked cancelled when its attempt is
  // in flight); `forget` sees each removed. True if the front was removed.
  bool RemoveSession(SessionId session, const Forget& forget);
  // Shows every waiter to `visit` (which may move its callback out), then empties the queue
  // but for a front whose attempt is in flight, which stays marked cancelled.
  void CancelAll(const std::function<void(Waiter&)>& visit);
  // Shows every waiter still waiting for an answer (neither cancelled nor expired), in order.
  template <class Visit>
  void ForEachWaiting(Visit&& visit) const {
    for (const Waiter& w : waiters_) {
      if (!w.cancelled && !w.expired) visit(w);
    }
  }

 private:
  // A list, not a deque: an empty std::deque still allocates about half a KiB, and almost
  // every held lock has no waiter.
  std::list<Waiter> waiters_;
  WaiterIndex* index_ = nullptr;
  const std::string* name_ = nullptr;

  void Unindex(const Waiter& w) {
    if (index_ != nullptr) index_->Remove(w);
  }
};

}  // namespace lw
