// The semaphore peer of bench/run.sh: redis-semaphore's RedlockSemaphore (npm) over ioredis 4 on
// the same masters, doing the closed-loop cycles of redlock_bench.mjs on semaphores of K permits
// (the agent's sem-c64 and sem4-c16 parts). Each acquire is a new RedlockSemaphore (its own
// identifier), not refreshed (refreshInterval 0: the cycle is shorter than its lock timeout).
// Every acquire may retry every retry_delay_ms until wait_ms has passed (the library's own loop;
// an uncontended one needs no retry unless a master is slow).
//
//   node semaphore_bench.mjs --masters H:P,H:P,... --permits K --mode uncontended|contended
//        [--clients C] [--seconds S] [--warmup-seconds W] [--ttl-ms T] [--wait-ms W]
//        [--retry-delay-ms D] [--redis-pids P,...] [--prefix P] [--key-prefix lock:]
//        [--seed N] [--label L] [--json FILE]
import { createRequire } from 'node:module';

import { parseFlags, report, runClosedLoop, runMain, workload } from './closed_loop.mjs';

const require = createRequire(import.meta.url);
const Redis = require('ioredis');
const { RedlockSemaphore } = require('redis-semaphore');

async function main() {
  const f = parseFlags(process.argv.slice(2),
    ['masters', 'permits', 'ttl-ms', 'wait-ms', 'retry-delay-ms', 'redis-pids']);
  const w = workload(f);
  const permits = Number(f.permits ?? 4);
  const ttl = Number(f['ttl-ms'] ?? 10000);
  const waitMs = Number(f['wait-ms'] ?? 10000);
  const retryDelay = Number(f['retry-delay-ms'] ?? 10);
  const redisPids = (f['redis-pids'] ?? '').split(',').filter(Boolean).map(Number);
  const masters = (f.masters ?? '').split(',').filter(Boolean);
  if (masters.length === 0) throw new Error('--masters is required');
  const servers = masters.map((hp) => {
    const colon = hp.lastIndexOf(':');
    return new Redis({ host: hp.slice(0, colon), port: Number(hp.slice(colon + 1)),
      lazyConnect: true });
  });
  await Promise.all(servers.map((s) => s.connect()));

  const r = await runClosedLoop(w, {
    acquire: async (key, contended) => {
      const sem = new RedlockSemaphore(servers, key, permits, {
        lockTimeout: ttl, acquireTimeout: waitMs, retryInterval: retryDelay,
        refreshInterval: 0,
      });
      try {
        await sem.acquire();
      } catch (e) {
        e.code = 'acquire_not_granted';
        throw e;
      }
      return sem;
    },
    release: (sem) => sem.release(),
    pids: redisPids,
  });
  await Promise.all(servers.map((s) => s.quit()));
  return report(f, w, r, { bench: 'redis-semaphore', label: 'redis-semaphore',
    extra: [['permits', permits]] });
}

runMain('semaphore_bench', main);
