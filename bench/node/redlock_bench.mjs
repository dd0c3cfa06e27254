// The peer baseline of bench/run.sh: node-redlock 4.2 over ioredis 4, doing the same closed-loop
// acquire+release cycles as lw_bench and lw_bench_raw, with the same workload definitions
// (bench/cycle_load.h) and the same output (one key=value line, JSON appended to --json).
//
//   node redlock_bench.mjs --masters H:P,H:P,... --mode uncontended|contended|mixed
//        [--clients C] [--seconds S] [--warmup-seconds W] [--ttl-ms T] [--wait-ms W]
//        [--retry-delay-ms D] [--retry-jitter-ms J] [--autopipeline] [--prefix P]
//        [--key-prefix lock:] [--hot-keys K] [--hot-share F] [--redis-pids P,...]
//        [--seed N] [--label L] [--json FILE]
//
// C concurrent async loops share one ioredis client per master (as an app using redlock
// would). Uncontended acquires make one attempt; contended ones (contended mode, hot keys in
// mixed mode) retry every retry_delay_ms ± retry_jitter_ms (redlock's own jitter is symmetric)
// until wait_ms has passed. --autopipeline turns on ioredis' enableAutoPipelining.
// Every random choice (the mixed mode's picks, and node-redlock's retry jitter, which calls
// Math.random) comes from one generator seeded by --seed (default 1), printed as seed=N.
import { createRequire } from 'node:module';

import { parseFlags, report, runClosedLoop, runMain, workload } from './closed_loop.mjs';

const require = createRequire(import.meta.url);
const Redis = require('ioredis');
const Redlock = require('redlock');

async function main() {
  const f = parseFlags(process.argv.slice(2),
    ['masters', 'ttl-ms', 'wait-ms', 'retry-delay-ms', 'retry-jitter-ms', 'redis-pids'],
    ['autopipeline']);
  const w = workload(f); // seeds Math.random before redlock draws its first jitter
  const ttl = Number(f['ttl-ms'] ?? 10000);
  const waitMs = Number(f['wait-ms'] ?? 10000);
  const retryDelay = Number(f['retry-delay-ms'] ?? 10);
  const retryJitter = Number(f['retry-jitter-ms'] ?? 10);
  const redisPids = (f['redis-pids'] ?? '').split(',').filter(Boolean).map(Number);
  const autopipeline = Boolean(f.autopipeline);
  const masters = (f.masters ?? '').split(',').filter(Boolean);
  if (masters.length === 0) throw new Error('--masters is required');

  const servers = masters.map((hp) => {
    const colon = hp.lastIndexOf(':');
    const [host, port] = [hp.slice(0, colon), Number(hp.slice(colon + 1))];
    return new Redis({ host, port, enableAutoPipelining: autopipeline, lazyConnect: true });
  });
  await Promise.all(servers.map((s) => s.connect()));
  // One attempt for uncontended keys; retries for contended ones. (redlock reads retryCount
  // with `||`, so 0 cannot be passed per call: two instances over the same clients.)
  const once = new Redlock(servers, { retryCount: 0, retryDelay, retryJitter });
  const waiting = new Redlock(servers, {
    retryCount: Math.max(1, Math.ceil(waitMs / Math.max(1, retryDelay))), retryDelay, retryJitter,
  });
  for (const r of [once, waiting]) r.on('clientError', () => {});

  const r = await runClosedLoop(w, {
    acquire: async (key, contended) => {
      try {
        return await (contended ? waiting : once).lock(key, ttl);
      } catch (e) {
        e.code = `acquire_${e.name === 'LockError' ? 'not_granted' : 'error'}`;
        throw e;
      }
    },
    release: (lock) => lock.unlock(),
    pids: redisPids,
  });
  await Promise.all(servers.map((s) => s.quit()));
  // Contended misses are expected to be rare with a 10 s wait; any failure fails the run.
  return report(f, w, r, {
    bench: 'node', label: autopipeline ? 'node-autopipe' : 'node',
    extra: [['autopipeline', autopipeline ? 1 : 0]],
  });
}

runMain('redlock_bench', main);
