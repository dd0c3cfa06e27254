#pragma once
// The arithmetic of Redlock, free of I/O and clocks so it can be tested exhaustively.

#include <cstdint>

namespace lw {

// Votes needed out of n masters: a strict majority, n/2 + 1.
int QuorumSize(int n_masters);

// Masters that must confirm both phases of a fenced grant so that fences keep increasing while
// a majority of masters keep their data: a grant writes its fence on W masters, the next one
// reads on R masters, and the two must share a master that kept its data. With K >= quorum such
// masters, |W ∩ R ∩ K| >= W + R + K - 2N >= 1 needs W = R >= ceil((2N - quorum + 1) / 2):
// 1 of 1, 2 of 2, 3 of 3, 3 of 4, 4 of 5, 5 of 6, 6 of 7. Never below the quorum.
int FenceQuorumSize(int n_masters);

// Clock-drift allowance for a ttl: ttl * drift_factor + 2 ms (the +2 ms covers the
// millisecond granularity of Redis expiry), rounded up.
int64_t DriftAllowanceMs(int64_t ttl_ms, double drift_factor);

// Time left on a lock whose SET was sent elapsed_ms ago: ttl - elapsed - drift.
// May be zero or negative, meaning the lock must be treated as not acquired.
int64_t ValidityMs(int64_t ttl_ms, int64_t elapsed_ms, double drift_factor);

// Delay before the next acquire attempt: base plus a uniformly drawn share of jitter.
// unit_random must lie in [0, 1); the caller owns the randomness.
int64_t RetryDelayMs(int64_t base_ms, int64_t jitter_ms, double unit_random);

// Counts the answers of one round sent to every master and says when it is decided.
//
// Two thresholds: `quorum` yes votes from masters whose votes count (not in restart
// quarantine), and `needed` yes votes in all (a fenced grant needs more masters than a plain
// one; quarantined masters count there, see FenceQuorumSize). A round is won when both are met
// and lost as soon as either became impossible.
class VoteTally {
 public:
  // n_counting: masters whose votes count toward quorum (default: all). needed < quorum
  // (e.g. the default 0) means `quorum`.
  VoteTally(int n_masters, int quorum, int needed = 0, int n_counting = -1)
      : n_(n_masters),
        quorum_(quorum),
        needed_(needed < quorum ? quorum : needed),
        n_counting_(n_counting < 0 ? n_masters : n_counting) {}

  // counts: false for a master in quarantine (its answer is recorded, its vote does not count).
  void Yes(bool counts = true) { ++yes_, counting_yes_ += counts; }
  void No(bool counts = true) { ++no_, counting_no_ += counts; }  // answered and refused
  // No usable answer: error, disconnect or timeout.
  void Failed(bool counts = true) { ++failed_, counting_failed_ += counts; }

  int yes() const { return yes_; }
  int no() const { return no_; }
  int failed() const { return failed_; }
  int answered() const { return yes_ + no_; }
  int outstanding() const { return n_ - yes_ - no_ - failed_; }
  // Yes votes that count toward quorum, and yes votes from quarantined masters.
  int counting_yes() const { return counting_yes_; }
  int counting_answered() const { return counting_yes_ + counting_no_; }
  int quarantined_yes() const { return yes_ - counting_yes_; }
  int not_counting() const { return n_ - n_counting_; }  // masters in quarantine
  int quorum() const { return quorum_; }
  int needed() const { return needed_; }
  bool Won() const { return counting_yes_ >= quorum_ && yes_ >= needed_; }
  bool Lost() const {
    const int counting_outstanding = n_counting_ - counting_yes_ - counting_no_ - counting_failed_;
    return counting_yes_ + counting_outstanding < quorum_ ||
           yes_ + outstanding() < needed_;
  }
  bool Decided() const { return Won() || Lost(); }
  bool AllIn() const { return outstanding() == 0; }

 private:
  int n_;
  int quorum_;
  int needed_;
  int n_counting_;
  int yes_ = 0;
  int no_ = 0;
  int failed_ = 0;
  int counting_yes_ = 0;  // the same three, from masters whose votes count
  int counting_no_ = 0;
  int counting_failed_ = 0;
};

}  // namespace lw
