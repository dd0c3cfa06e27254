// What the Node peers of bench/run.sh share (redlock_bench.mjs, etcd_bench.mjs,
// semaphore_bench.mjs): flags, the closed loop of acquire+release cycles with the workload
// definitions of bench/cycle_load.h, and the output (one key=value line, JSON appended to --json).
import { appendFileSync, readFileSync } from 'node:fs';

import { mulberry32 } from '../../tests/safety/rng.mjs';

// The flags every peer takes; a peer adds its own (`known`) and switches.
export const COMMON_FLAGS = ['mode', 'clients', 'seconds', 'warmup-seconds', 'prefix',
  'key-prefix', 'hot-keys', 'hot-share', 'seed', 'label', 'json'];

export function parseFlags(argv, known, switches = []) {
  const all = new Set([...COMMON_FLAGS, ...known]);
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    if (!argv[i].startsWith('--')) throw new Error(`unexpected argument ${argv[i]}`);
    const name = argv[i].slice(2);
    if (switches.includes(name)) { out[name] = true; continue; }
    if (!all.has(name)) throw new Error(`unknown flag --${name}`);
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

// CPU seconds (user + system) the processes used so far; a process gone counts 0.
export function cpuSeconds(pids) {
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

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nowUs = () => Number(process.hrtime.bigint()) / 1000;

// The workload of the common flags: mode, clients, seconds, the keys (uncontended: each client
// its own; contended: one; mixed: hot_share of the cycles on hot_keys keys), and Math.random
// seeded by --seed (default 1) before any peer library draws from it.
export function workload(f) {
  const mode = f.mode ?? 'uncontended';
  if (!['uncontended', 'contended', 'mixed'].includes(mode)) {
    throw new Error(`--mode must be uncontended, contended or mixed, not ${mode}`);
  }
  const seed = Number(f.seed ?? 1);
  if (!Number.isInteger(seed) || seed < 0 || seed >= 2 ** 32) {
    throw new Error(`--seed must be an integer in [0, 4294967295], not ${f.seed}`);
  }
  Math.random = mulberry32(seed);
  const clients = Number(f.clients ?? 1);
  const prefix = `${f['key-prefix'] ?? 'lock:'}${f.prefix ?? 'bench/'}`;
  const hotShare = Number(f['hot-share'] ?? 0.1);
  const own = Array.from({ length: clients }, (_, i) => `${prefix}u${i}`);
  let hot = [];
  if (mode === 'contended') hot = [`${prefix}one`];
  if (mode === 'mixed') {
    hot = Array.from({ length: Number(f['hot-keys'] ?? 4) }, (_, k) => `${prefix}hot${k}`);
  }
  // [key, index of the hot key or -1]
  const choose = (i) => {
    if (mode === 'uncontended') return [own[i], -1];
    if (mode === 'contended') return [hot[0], 0];
    if (Math.random() < hotShare && hot.length > 0) {
      const k = Math.floor(Math.random() * hot.length);
      return [hot[k], k];
    }
    return [own[i], -1];
  };
  return {
    mode, seed, clients, hot, choose,
    seconds: Number(f.seconds ?? 5),
    warmup: Number(f['warmup-seconds'] ?? 0.5),
  };
}

// Runs `clients` closed loops for warmup + seconds: acquire(key, contended, i) (i: the loop) → a
// handle (or a throw: a failed cycle, counted by its `code`, default acquire_error), then
// release(handle).
// Measures cycles, acquire latency, and for hot keys the wait and the hand-off (a release sent →
// the next grant of that key). pids: processes whose CPU per cycle is reported as `cpuKey`.
export async function runClosedLoop(w, { acquire, release, pids = [], cpuKey = 'redis' }) {
  let inWindow = false;
  let over = false;
  let cycles = 0;
  let failures = 0;
  const failedBy = {};
  const acquireUs = [];
  const waitUs = [];
  const handoffUs = [];
  const releaseSentAt = w.hot.map(() => -1);
  const fail = (code) => {
    failures++;
    failedBy[code] = (failedBy[code] ?? 0) + 1;
  };

  async function loop(i) {
    while (!over) {
      const [key, k] = w.choose(i);
      const sent = nowUs();
      let handle;
      try {
        handle = await acquire(key, k >= 0, i);
      } catch (e) {
        fail(e.code ?? 'acquire_error');
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
        await release(handle);
        if (inWindow) cycles++;
      } catch {
        fail('release_error');
      }
    }
  }

  const loops = Array.from({ length: w.clients }, (_, i) => loop(i));
  await sleep(w.warmup * 1000);
  inWindow = true;
  const cpu0 = cpuSeconds(pids);
  const self0 = process.cpuUsage();
  const t0 = nowUs();
  await sleep(w.seconds * 1000);
  inWindow = false;
  over = true;
  const windowSeconds = (nowUs() - t0) / 1e6;
  const serverCpu = cpuSeconds(pids) - cpu0;
  const self1 = process.cpuUsage(self0);
  const selfCpu = (self1.user + self1.system) / 1e6;
  await Promise.all(loops);
  return { cycles, failures, failedBy, acquireUs, waitUs, handoffUs, windowSeconds, serverCpu,
    selfCpu, pids, cpuKey };
}

// Prints the result line and appends its JSON to f.json; returns the exit status (0 when some
// cycles ran and none failed).
export function report(f, w, r, { bench, label, extra = [] }) {
  const fields = [['bench', bench, true], ['label', f.label ?? label, true],
    ['mode', w.mode, true], ['clients', w.clients], ['seed', w.seed],
    ['seconds', r.windowSeconds.toFixed(3)], ['cycles', r.cycles],
    ['cycles_per_s', Math.round(r.cycles / r.windowSeconds)], ['failed', r.failures]];
  const pct = (name, v) => {
    v.sort((a, b) => a - b);
    for (const [suffix, p] of [['p50', 0.5], ['p90', 0.9], ['p99', 0.99], ['max', 1]]) {
      fields.push([`${name}_${suffix}`, Math.round(percentile(v, p))]);
    }
  };
  pct('acquire_us', r.acquireUs);
  if (w.hot.length > 0) {
    fields.push(['wait_samples', r.waitUs.length]);
    pct('wait_us', r.waitUs);
    pct('handoff_us', r.handoffUs);
  }
  for (const [code, n] of Object.entries(r.failedBy).sort()) fields.push([`failed_${code}`, n]);
  const perK = (cpu) => (r.cycles > 0 ? (cpu / (r.cycles / 1000)).toFixed(4) : 0);
  if (r.pids.length > 0) fields.push([`${r.cpuKey}_cpu_s_per_1k`, perK(r.serverCpu)]);
  fields.push(['bench_cpu_s_per_1k', perK(r.selfCpu)]);
  fields.push(...extra);
  console.log(fields.map(([k, v]) => `${k}=${v}`).join(' '));
  if (f.json) {
    const obj = Object.fromEntries(fields.map(([k, v, text]) => [k, text ? String(v) : Number(v)]));
    appendFileSync(f.json, `${JSON.stringify(obj)}\n`);
  }
  return r.failures === 0 && r.cycles > 0 ? 0 : 1;
}

// Runs main(), exiting with its status, or 2 (after printing the error) when it throws.
export function runMain(name, main) {
  main().then((code) => process.exit(code), (e) => {
    console.error(`${name}: ${e.stack ?? e}`);
    process.exit(2);
  });
}
