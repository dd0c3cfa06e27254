#pragma once
// lw_bench --mode hold: many auto-renewed locks held at once (see bench/README.md).
//
// S sessions (connections) each acquire L distinct resources "<prefix><s>/<l>" with renew:true
// and ttl T (--inflight requests in flight over all sessions, default 256, the sessions taking
// turns; --wait-ms W, default 0, is each acquire's wait_ms), hold them all for D seconds, then
// release them. Reports how many acquires succeeded, the agent's RSS (VmRSS, sampled every
// 250 ms; VmHWM), its CPU during the hold, `lost` events, and how the releases were answered
// (`not_held` = the lock was lost while held).
//
// Renewal punctuality is measured from outside, on the first master: the agent renews every
// ttl/3 (src/locking/lock_engine.cc), so a held key's PTTL should never drop much below 2/3 of
// the ttl. A sampler sends PTTL for every granted key in turn, at --sample-keys-per-second,
// from the first grant until the release phase. A sample's lateness is 2/3·ttl − PTTL; a
// sample more than 100 ms late counts as late (and the key as a late key); PTTL below ttl/3
// and a missing key are counted apart (a key can be missing on one master while the lock is
// validly held on a quorum, so missing alone is not a failure). Sampling finds a late renewal only
// if a sample falls inside its late stretch, so these counts are lower bounds; the maximum lateness
// seen is exact for the samples taken.

#include "measure.h"

namespace lw::bench {

// Runs the hold test; returns the exit status (0 clean, 1 some lock failed, 2 setup error).
int RunHold(const Flags& f);

}  // namespace lw::bench
