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
import { appendFileSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

import { mulberry32 } from '../../tests/safety/rng.mjs';

const require = createRequire(import.meta.url);
const Redis = require('ioredis');
const Redlock = require('redlock');

const known = new Set(['masters', 'mode', 'clients', 'seconds', 'warmup-seconds', 'ttl-ms',
  'wait-ms', 'retry-delay-ms', 'retry-jitter-ms', 'prefix', 'key-prefix', 'hot-keys',
  'hot-share', 'redis-pids', 'seed', 'label', 'json']);
const switches = new Set(['autopipeline']);

function parseFlags(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    if (!argv[i].startsWith('--')) throw new Error(`unexpected argument ${argv[i]}`);
    const name = argv[i].slice(2);
    if (switches.has(name)) { out[name] = true; continue; }
    if (!known.has(name)) throw new Error(`unknown flag --${name}`);
    if (i + 1 >= argv.length) throw new Error(`--${name} needs a value`);
    out[name] = argv[++i];
  }
  return out;
}

// Nearest-rank percentile of sorted samples (µs), as bench/measure.cc.
function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const rank = p * sorted.length;
  const i = rank <= 1 ? 0 : Math.ceil(rank) - 1;
  return sorted[Math.min(i, sorted.length - 1)];
}

function cpuSeconds(pids) {
  const tick = 100; // USER_HZ on Linux
  let total = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      total += (Number(fields[11]) + Number(fields[12])) / tick; // fields 14 and 15
    } catch { /* gone: counts 0 */ }
  }
  return total;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nowUs = () => Number(process.hrtime.bigint()) / 1000;

async function main() {
  const f = parseFlags(process.argv.slice(2));
  const mode = f.mode ?? 'uncontended';
  if (!['uncontended', 'contended', 'mixed'].includes(mode)) {
    throw new Error(`--mode must be uncontended, contended or mixed, not ${mode}`);
  }
  const clients = Number(f.clients ?? 1);
  const seconds = Number(f.seconds ?? 5);
  const warmup = Number(f['warmup-seconds'] ?? 0.5);
  const ttl = Number(f['ttl-ms'] ?? 10000);
  const waitMs = Number(f['wait-ms'] ?? 10000);
  const retryDelay = Number(f['retry-delay-ms'] ?? 10);
  const retryJitter = Number(f['retry-jitter-ms'] ?? 10);
  const prefix = f.prefix ?? 'bench/';
  const keyPrefix = f['key-prefix'] ?? 'lock:';
  const hotKeys = Number(f['hot-keys'] ?? 4);
  const hotShare = Number(f['hot-share'] ?? 0.1);
  const redisPids = (f['redis-pids'] ?? '').split(',').filter(Boolean).map(Number);
  const autopipeline = Boolean(f.autopipeline);
  const seed = Number(f.seed ?? 1);
  if (!Number.isInteger(seed) || seed < 0 || seed >= 2 ** 32) {
    throw new Error(`--seed must be an integer in [0, 4294967295], not ${f.seed}`);
  }
  Math.random = mulberry32(seed); // before redlock draws its first jitter
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

  const own = Array.from({ length: clients }, (_, i) => `${keyPrefix}${prefix}u${i}`);
  let hot = [];
  if (mode === 'contended') hot = [`${keyPrefix}${prefix}one`];
  if (mode === 'mixed') {
    hot = Array.from({ length: hotKeys }, (_, k) => `${keyPrefix}${prefix}hot${k}`);
  }
  const choose = (i) => {
    if (mode === 'uncontended') return [own[i], -1];
    if (mode === 'contended') return [hot[0], 0];
    if (Math.random() < hotShare && hot.length > 0) {
      const k = Math.floor(Math.random() * hot.length);
      return [hot[k], k];
    }
    return [own[i], -1];
  };

  let inWindow = false;
  let over = false;
  let cycles = 0;
  let failures = 0;
  const failedBy = {};
  const acquireUs = [];
  const waitUs = [];
  const handoffUs = [];
  const releaseSentAt = hot.map(() => -1);

  async function loop(i) {
    while (!over) {
      const [key, k] = choose(i);
      const sent = nowUs();
      let lock;
      try {
        lock = await (k >= 0 ? waiting : once).lock(key, ttl);
      } catch (e) {
        failures++;
        const code = `acquire_${e.name === 'LockError' ? 'not_granted' : 'error'}`;
        failedBy[code] = (failedBy[code] ?? 0) + 1;
        continue;
      }
      const now = nowUs();
      if (k >= 0) {
        if (releaseSentAt[k] >= 0 && inWindow) handoffUs.push(now - releaseSentAt[k]);
        releaseSentAt[k] = -1;
      }
      if (inWindow) {
        acquireUs.push(now - sent);
        if (k >= 0) waitUs.push(now - sent);
      }
      if (k >= 0) releaseSentAt[k] = nowUs();
      try {
        await lock.unlock();
        if (inWindow) cycles++;
      } catch (e) {
        failures++;
        failedBy.release_error = (failedBy.release_error ?? 0) + 1;
      }
    }
  }

  const loops = Array.from({ length: clients }, (_, i) => loop(i));
  await sleep(warmup * 1000);
  inWindow = true;
  const cpu0 = cpuSeconds(redisPids);
  const self0 = process.cpuUsage();
  const t0 = nowUs();
  await sleep(seconds * 1000);
  inWindow = false;
  over = true;
  const windowSeconds = (nowUs() - t0) / 1e6;
  const redisCpu = cpuSeconds(redisPids) - cpu0;
  const self1 = process.cpuUsage(self0);
  const selfCpu = (self1.user + self1.system) / 1e6;
  await Promise.all(loops);
  await Promise.all(servers.map((s) => s.quit()));

  const label = f.label ?? (autopipeline ? 'node-autopipe' : 'node');
  const fields = [['bench', 'node', true], ['label', label, true],
    ['mode', mode, true], ['clients', clients], ['seed', seed],
    ['seconds', windowSeconds.toFixed(3)],
    ['cycles', cycles], ['cycles_per_s', Math.round(cycles / windowSeconds)], ['failed', failures]];
  const pct = (name, v) => {
    v.sort((a, b) => a - b);
    for (const [suffix, p] of [['p50', 0.5], ['p90', 0.9], ['p99', 0.99], ['max', 1]]) {
      fields.push([`${name}_${suffix}`, Math.round(percentile(v, p))]);
    }
  };
  pct('acquire_us', acquireUs);
  if (hot.length > 0) {
    fields.push(['wait_samples', waitUs.length]);
    pct('wait_us', waitUs);
    pct('handoff_us', handoffUs);
  }
  for (const [code, n] of Object.entries(failedBy).sort()) fields.push([`failed_${code}`, n]);
  if (redisPids.length > 0) {
    fields.push(['redis_cpu_s_per_1k', cycles > 0 ? (redisCpu / (cycles / 1000)).toFixed(4) : 0]);
  }
  fields.push(['bench_cpu_s_per_1k', cycles > 0 ? (selfCpu / (cycles / 1000)).toFixed(4) : 0]);
  fields.push(['autopipeline', autopipeline ? 1 : 0]);
  console.log(fields.map(([k, v]) => `${k}=${v}`).join(' '));
  if (f.json) {
    const obj = Object.fromEntries(fields.map(([k, v, text]) => [k, text ? String(v) : Number(v)]));
    appendFileSync(f.json, `${JSON.stringify(obj)}\n`);
  }
  // Contended misses are expected to be rare with a 10 s wait; any failure fails the run.
  return failures === 0 && cycles > 0 ? 0 : 1;
}

main().then((code) => process.exit(code), (e) => {
  console.error(`redlock_bench: ${e.stack ?? e}`);
  process.exit(2);
});
