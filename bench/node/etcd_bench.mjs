// The etcd peer of bench/run.sh: etcd 3.4 (Debian's etcd-server, 3 members on loopback) through
// the etcd3 npm client, doing the closed-loop cycles of redlock_bench.mjs with the fast path of
// etcd's concurrency.Mutex: one lease per loop, granted once (kept alive by the client), a
// transaction per acquire that puts the key on that lease only if its create revision is 0 (it
// does not exist), and a delete per release. A contended acquire that finds the key taken tries
// again every retry_delay_ms ± retry_jitter_ms until wait_ms has passed (Mutex would watch the
// key instead; on one hot key the retries are the cheaper of the two for the server).
//
//   node etcd_bench.mjs --endpoints H:P,H:P,... --mode uncontended|contended|mixed
//        [--clients C] [--seconds S] [--warmup-seconds W] [--lease-s T] [--wait-ms W]
//        [--retry-delay-ms D] [--retry-jitter-ms J] [--etcd-pids P,...] [--prefix P]
//        [--key-prefix lock:] [--seed N] [--label L] [--json FILE]
//
// Output as the other peers', with etcd_cpu_s_per_1k (the members' CPU per 1,000 cycles).
import { createRequire } from 'node:module';

import { parseFlags, report, runClosedLoop, runMain, sleep, workload } from './closed_loop.mjs';

const require = createRequire(import.meta.url);
const { Etcd3 } = require('etcd3');

async function main() {
  const f = parseFlags(process.argv.slice(2), ['endpoints', 'lease-s', 'wait-ms',
    'retry-delay-ms', 'retry-jitter-ms', 'etcd-pids']);
  const w = workload(f);
  const leaseS = Number(f['lease-s'] ?? 10);
  const waitMs = Number(f['wait-ms'] ?? 10000);
  const retryDelay = Number(f['retry-delay-ms'] ?? 10);
  const retryJitter = Number(f['retry-jitter-ms'] ?? 10);
  const pids = (f['etcd-pids'] ?? '').split(',').filter(Boolean).map(Number);
  const endpoints = (f.endpoints ?? '').split(',').filter(Boolean);
  if (endpoints.length === 0) throw new Error('--endpoints is required');

  const client = new Etcd3({ hosts: endpoints.map((e) => `http://${e}`) });
  const leases = [];
  const ids = [];
  for (let i = 0; i < w.clients; i++) {
    const lease = client.lease(leaseS);
    leases.push(lease);
    ids.push(await lease.grant());
  }
  const tryOnce = async (key, i) => {
    const res = await client.if(key, 'Create', '==', 0)
      .then(client.put(key).value(String(ids[i])).lease(ids[i])).commit();
    return res.succeeded;
  };
  const r = await runClosedLoop(w, {
    acquire: async (key, contended, i) => {
      const deadline = Date.now() + (contended ? waitMs : 0);
      for (;;) {
        if (await tryOnce(key, i)) return key;
        if (Date.now() >= deadline) throw Object.assign(new Error('taken'), { code: 'acquire_not_granted' });
        await sleep(Math.max(0, retryDelay + (Math.random() * 2 - 1) * retryJitter));
      }
    },
    release: (key) => client.delete().key(key),
    pids,
    cpuKey: 'etcd',
  });
  await Promise.all(leases.map((l) => l.revoke().catch(() => {})));
  client.close();
  return report(f, w, r, { bench: 'etcd', label: 'etcd' });
}

runMain('etcd_bench', main);
