#pragma once
// lw_bench --mode upgrade: what clients see while the agent upgrades in place (bench/README.md,
// "Upgrade in place").
//
// S sessions (connections) each acquire L renewed locks "<prefix><s>/<l>" (ttl T, paced as in
// the hold test: hold_session.h). Then a load runs on N of those sessions (--load-sessions,
// default all, spread evenly): each a closed loop of acquire "<load-prefix><s>" (ttl 10 s, not
// renewed, --load-wait-ms) -> release -> ping, pausing --think-ms before every request. After
// --before-seconds of load, `{"op":"upgrade"}` goes out on a connection of its own; the load
// goes on for --after-seconds after the reply (plus the grace), then stops.
//
// Every load request's latency (sent -> reply) is recorded and put in one of three phases,
// with U = upgrade sent, R = its reply, G = --grace-ms (default 200):
//   before  answered before U
//   across  the rest that were sent by R + G (in flight at U, or sent during the hand-over)
//   after   sent after R + G
// Each phase reports count and p50/p99/max (µs); also the longest single request (ms, its op
// and when it was sent relative to U), and the longest stretch in which the bench received no
// reply at all. From the upgrade's reply: handover_ms (what the agent reports), sessions,
// locks, and the wall time U -> R.
//
// Then, once --watch-ms (default: the ttl + 1 s) have passed since the reply, so that every
// hold taken over has had to be renewed by the new process at least once, "0 lost" is checked
// (a renewal the new process misses shows only then): no pushed event on any connection (the
// only ones possible here are `lost`), no connection closed, `held` on each session lists
// every lock it was granted (counted against L and against the total S x L), the reply's pid
// differs from previous_pid (= --agent-pid), the old process has exited and the new one runs;
// and every lock is released with `ok` (a `not_held` is a lock lost; an `ok` alone proves
// little, since the agent also releases a token it does not know if the key still holds it).
// PTTL is sampled on master 1 as in the hold test (--sample-keys-per-second, default 10,000)
// from the first grant until the `held` check.
//
// Flags: --socket --agent-pid --masters (required); --sessions S (1000) --locks L (100)
// --ttl-ms T (30000) --wait-ms W (10000) --inflight (256) --prefix (upgrade/) --key-prefix
// (lock:) --load-sessions N --think-ms (1000) --load-wait-ms (10000) --load-prefix
// (upgrade-load/) --before-seconds (5) --after-seconds (5) --grace-ms (200) --watch-ms
// (ttl + 1000) --upgrade-timeout-ms (60000) --pid-file PATH (the new agent's pid, written as
// soon as the reply arrives, so that a caller can stop it whatever happens next) --label
// --json.
//
// Exit status: 0 when everything above holds (nothing about speed), 1 otherwise, 2 on a setup
// error (the agent cannot be reached).

#include "measure.h"

namespace lw::bench {

int RunUpgradeBench(const Flags& f);

}  // namespace lw::bench
