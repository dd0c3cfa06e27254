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
// 1 of 1, 2 of 2, 3 of 3, 3 of 4, 4 of 5, 6 of 7. Never below the quorum.
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
// A round is won at quorum "yes" votes; it is lost as soon as quorum became impossible.
class VoteTally {
 public:
  VoteTally(int n_masters, int quorum) : n_(n_masters), quorum_(quorum) {}

  void Yes() { ++yes_; }
  void No() { ++no_; }          // the master answered and refused (held by another token)
  void Failed() { ++failed_; }  // no usable answer: error, disconnect or timeout

  int yes() const { return yes_; }
  int no() const { return no_; }
  int failed() const { return failed_; }
  int answered() const { return yes_ + no_; }
  int outstanding() const { return n_ - yes_ - no_ - failed_; }
  bool Won() const { return yes_ >= quorum_; }
  bool Lost() const { return yes_ + outstanding() < quorum_; }
  bool Decided() const { return Won() || Lost(); }
  bool AllIn() const { return outstanding() == 0; }

 private:
  int n_;
  int quorum_;
  int yes_ = 0;
  int no_ = 0;
  int failed_ = 0;
};

}  // namespace lw
