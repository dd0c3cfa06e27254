#pragma once
// Who leads an election, decided from what each master answered to the record read
// (locking/claims.h ReadRecordRound), and what an observer of the election is told after each
// such reading. Pure: the agent's Elections part does the reading and the delivery.
//
// The rule (docs/protocol.md "Elections"): the leader is the record found on at least a quorum
// of the masters whose answers count; nobody leads when a quorum answered and no record can
// reach a quorum even with the masters that did not answer; otherwise the reading cannot
// decide. Why a quorum, and why at most one record qualifies:
//  - a master answers a record only where P R still holds the value the record names (the
//    read script), and a master holds one value at P R, so one read sees at most one record on
//    a quorum of masters (two sets of quorum size share a master);
//  - a granted leader wrote its record on a fence quorum (>= quorum) of masters in phase 2, and
//    every extend confirmed by a quorum keeps both P R and the record there, so a live leader
//    whose masters all answer is always found;
//  - a record seen on fewer masters is a hold on its way out (expiring or released) or an
//    attempt that has not been granted (phase 2 on too few masters, undone after): naming it
//    would name a leader that is not, or not yet, one;
//  - masters in restart quarantine do not count (they may have lost the hold, or got back a
//    stale one), as they count for no grant or extend;
//  - the terms of records named this way keep increasing: a record on a quorum W was written
//    with a fence raised on W, and the next grant reads the counters of a fence quorum R with
//    W + R > N masters, so its fence is higher (while the masters keep their data).
// The rule names the highest term when several records reach a quorum, which one read never
// sees; it is there so that the rule stays total.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/election_record.h"

namespace lw {

// What the masters answered to one record read, by master index.
struct RecordAnswers {
  std::vector<std::optional<std::string>> values;  // the record text a master answered
  std::vector<bool> nil;                           // answered: no record (or not the holder's)
  std::vector<bool> counts;  // its answer counts (not in restart quarantine); empty: all count
};

struct LeaderReading {
  enum class State : uint8_t {
    kLeader,   // record names the leader
    kNone,     // nobody leads
    kUnknown,  // too few answers to tell (fewer than a quorum, or enough missing to matter)
  };
  State state = State::kUnknown;
  ElectionRecord record;  // kLeader only
  int answered = 0;       // masters whose answer counts and that answered
  int agreeing = 0;       // of them, how many answered the most common record
};

LeaderReading DecideLeader(const RecordAnswers& answers, int quorum);

// A change as an observer is told it.
struct LeaderEvent {
  std::optional<ElectionRecord> leader;  // nullopt: nobody leads
  // The leader's term; with nobody leading, the last term the observer was told of (0: none).
  int64_t term = 0;
  // The observer may have missed changes: the term advanced by more than one since its last
  // event (or since the reply it started from), or a reading between could not decide.
  bool missed = false;
};

// What one observer has been told. Readings must come in the order they were started, each
// started after the one before it ended (Elections reads each name one read at a time). Terms
// never go back: a reading with a lower term than one told is dropped.
class LeaderFeed {
 public:
  // The reading the observe reply carried (kLeader or kNone): the starting point.
  void Start(const LeaderReading& reading);
  // A later reading: the event to push, if it changes what the observer was told.
  std::optional<LeaderEvent> Next(const LeaderReading& reading);

  int64_t term() const { return term_; }
  bool leading() const { return leading_; }

 private:
  int64_t term_ = 0;          // the highest term told (0: none yet)
  bool leading_ = false;      // the last thing told names a leader (of term_)
  bool interrupted_ = false;  // a reading could not decide since the last thing told
};

}  // namespace lw
