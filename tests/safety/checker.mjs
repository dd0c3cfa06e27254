#!/usr/bin/env node
// Jepsen-style safety checker (issue 5): several agents over the same 5 real redis-server
// masters, client processes contending for a few resources with fenced locks, a fenced register
// in this process, and faults (masters killed and restarted empty, a master and a client
// stopped past the ttl, an agent killed) while they run. Beside them, through the same agents
// and under the same faults, clients of a semaphore and of a read-write lock (issue 18), whose
// holds are checked for at most K at once and a writer alone. See README.md here.
//
//   node tests/safety/checker.mjs            short mode (about 2 minutes)
//   node tests/safety/checker.mjs --long     until 100 000 grants, faults cycling
//   node tests/safety/checker.mjs --long --seconds 600   ten minutes of traffic instead
//   node tests/safety/checker.mjs --tls      the same over TLS-only masters (rediss://, a CA
//                                            and certificates made by openssl), through the proxy
//
// Environment: LOCKWARDEN_BINARY (default build/lockwarden), LOCKWARDEN_TEST_OUTPUT_DIR
// (default build/test-output/safety: agent and client logs, history.json, summary.txt),
// LOCKWARDEN_SAFETY_SEED (the seed of every random choice, see rng.mjs; --seed wins over it;
// default 1 in short mode, a random one in long mode; printed at the start either way).
// Exit status: 0 pass, 1 a violation or too little done, 2 the run could not be set up.
//
// The short mode gates the test command, so it fails only on what a loaded machine cannot
// cause: a safety violation, a fault that could not be injected, a client that died, or no
// progress at all (no grant within RESUME_FAIL_FACTOR times the liveness goal of a heal; fewer
// than minGrantsShort grants in the whole run). How fast grants resume after each heal is
// reported against the goal (max_ttl + 1 s); the long mode also fails when it is missed.

import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as pause } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import {
  Agent, RedisCluster, agentBinary, makeTempDir, removeTempDir, repoRoot, spawnLogged,
  stopChild, waitUntil,
} from '../browser/fixture.mjs';
import { analyze } from './analysis.mjs';
import { FAIL_ON_STARVATION } from './fairness.mjs';
import { ClockShift, buildClockShift, clockShiftEnv } from './clock_shift.mjs';
import { FaultProxy } from './fault_proxy.mjs';
import { faultsFor, runFaults } from './faults.mjs';
import { linkId } from './net_faults.mjs';
import { FencedRegister, nowUs } from './register.mjs';
import { makeTlsFiles } from '../browser/tls_files.mjs';
import { summaryLines, writeHistory } from './report.mjs';
import { pickSeed, subSeed } from './rng.mjs';

const { values: opts } = parseArgs({
  allowNegative: true,
  options: {
    long: { type: 'boolean', default: false },
    tls: { type: 'boolean', default: false }, // TLS-only masters, the agents on rediss://
    grants: { type: 'string' }, // long mode: stop after this many grants (default 100000)
    seconds: { type: 'string' }, // long mode: stop after this much traffic instead
    cycles: { type: 'string' }, // short mode: fault cycles (default 2)
    agents: { type: 'string', default: '3' },
    clients: { type: 'string', default: '9' },
    // The semaphore's clients and its K, the read-write lock's readers and writers (0: none).
    'semaphore-clients': { type: 'string', default: '6' },
    permits: { type: 'string', default: '3' },
    readers: { type: 'string', default: '6' },
    writers: { type: 'string', default: '2' },
    // Clients of a plain (unfenced) mutex, m0.
    'mutex-clients': { type: 'string', default: '4' },
    // Clients taking two of three mutexes (t0, t1, t2) at once.
    'set-clients': { type: 'string', default: '4' },
    // The election workload: candidates campaigning for a few names, observers watching them.
    candidates: { type: 'string', default: '6' },
    observers: { type: 'string', default: '3' },
    // The share of exclusive acquires (register clients', writers') made detached leases.
    'detach-share': { type: 'string', default: '0.25' },
    // The share of the plain mutex's and the writers' holds taken twice, reentrantly.
    'reentrant-share': { type: 'string', default: '0.3' },
    // The SIGSTOP holders fault (a mutex, semaphore, read and write holder and a leader, each
    // stopped past its validity); on in both modes.
    'stop-holders': { type: 'boolean', default: true },
    // An agent setting for this run, NAME=VALUE (e.g. node-timeout-ms=100); repeatable.
    'agent-arg': { type: 'string', multiple: true, default: [] },
    seed: { type: 'string' }, // overrides LOCKWARDEN_SAFETY_SEED
    // Only the faults whose names contain one of these (comma-separated); default all.
    faults: { type: 'string' },
    // Whether a starved client (check 10) fails the run; default fairness.mjs FAIL_ON_STARVATION.
    'fail-on-starvation': { type: 'boolean' },
  },
});
const mode = opts.long ? 'long' : 'short';
const SHORT_MODE_SEED = 1;
const seed = pickSeed(opts.seed ?? process.env.LOCKWARDEN_SAFETY_SEED,
  opts.long ? null : SHORT_MODE_SEED);
// The short mode fails on a heal only when no grant came within this many times the goal.
const RESUME_FAIL_FACTOR = 10;
const outDir = process.env.LOCKWARDEN_TEST_OUTPUT_DIR ||
  path.join(repoRoot, 'build', 'test-output', 'safety');
const clientScript = fileURLToPath(new URL('./client.mjs', import.meta.url));
const candidateScript = fileURLToPath(new URL('./candidate.mjs', import.meta.url));

const cfg = {
  masters: 5,
  agents: Number(opts.agents),
  clients: Number(opts.clients),
  // Per agent: one slow client holding r0 for up to 80% of its validity (so that faults find
  // locks held), the others fast on r1 and r2 (so that there are many grants).
  resources: ['r0', 'r1', 'r2'],
  slowResources: ['r0'],
  fastResources: ['r1', 'r2'],
  slowHoldShare: 0.8,
  ttlMinMs: 1000,
  ttlMaxMs: 2000,
  maxTtlMs: 2000, // the agents' max_ttl_ms (unless --agent-arg sets it): also their restart quarantine
  waitMs: 3000,
  minValidityLeftMs: 100, // a client with less left skips the write
  holdMaxMs: 2, // a random pause between read and write, so that holders overlap if they can
  masterDownMs: 100, // restarted empty while the locks it held are still valid
  agentDownMs: 1000,
  // Plain traffic after each fault: max_ttl + 1 s (set below), so that quarantines end in between
  // and every violation falls in the reach of one fault only (verdicts.mjs).
  faultGapMs: null,
  warmupMs: 4000,
  shortCycles: Number(opts.cycles || 1),
  // Long mode: until this many grants of every kind (register grants, holds, leaders).
  longGrants: Number(opts.grants || 100000),
  longSeconds: opts.seconds ? Number(opts.seconds) : null,
  minGrantsShort: 200,
  // The hold clients (issue 18), spread over the agents. A semaphore of K with more clients
  // than K, always contended; readers holding up to a tenth of their validity so that they
  // overlap, writers holding briefly and pausing between holds (with none paused, a waiting
  // writer's mark would keep the readers out most of the time).
  holdKinds: [
    // A plain mutex without fences (the register clients' is fenced): what a client that
    // ignores fences gets; holding up to 30% of its validity so that faults find it held.
    // Never detached: the detached lease column has the register clients' and the writers'.
    { kind: 'mutex', prefix: 'mx', clients: Number(opts['mutex-clients']), resource: 'm0',
      acquire: {}, holdMaxMs: 50, holdShareMax: 0.3, idleMaxMs: 0, detachShare: 0 },
    { kind: 'semaphore', prefix: 'sem', clients: Number(opts['semaphore-clients']),
      resource: 's0', acquire: { permits: Number(opts.permits) }, holdMaxMs: 100,
      holdShareMax: 0.2, idleMaxMs: 0 },
    { kind: 'read', prefix: 'rd', clients: Number(opts.readers), resource: 'w0',
      acquire: { shared: true }, holdMaxMs: 100, holdShareMax: 0.1, idleMaxMs: 20 },
    { kind: 'write', prefix: 'wr', clients: Number(opts.writers), resource: 'w0',
      acquire: {}, holdMaxMs: 20, holdShareMax: 0, idleMaxMs: 200 },
    // Sets: two of three mutexes at once (docs/safety.md §13), named in a random order, each
    // grant judged as a mutex hold of its own; against each other, never deadlocked.
    { kind: 'mutex', prefix: 'set', clients: Number(opts['set-clients']),
      resources: ['t0', 't1', 't2'], several: 2, acquire: {}, holdMaxMs: 30, holdShareMax: 0.2,
      idleMaxMs: 0, detachShare: 0 },
  ],
  minHoldsShort: 50, // of each kind that has clients
  // Exclusive acquires made detached leases (client.mjs detachShare): released by token through
  // another connection, the acquiring connection closed right after the grant half the time.
  detachShare: Number(opts['detach-share']),
  // Exclusive holds of the hold clients taken twice by one owner (client.mjs reentrantShare).
  reentrantShare: Number(opts['reentrant-share']),
  // The election workload (candidate.mjs): candidate j on agent (j + 2) mod agents, campaigning
  // for a random name each term; one observer per agent (up to `observers`). A leader acts in
  // stretches of up to 60% of the validity left, extends by token (30% after each stretch, at
  // most twice a term), and ends a term by resigning or, 15% of the time, by closing its
  // connection.
  elections: {
    candidates: Number(opts.candidates), observers: Number(opts.observers), names: ['e0', 'e1'],
    ttlMinMs: 1000, ttlMaxMs: 2000, waitMs: 3000, actShareMax: 0.6, extendChance: 0.3,
    maxExtends: 2, dropChance: 0.15, marginMs: 20, idleMaxMs: 50, readMinMs: 20, readMaxMs: 80,
  },
  minLeadersShort: 50, // when there are candidates
  minLeaderReadsShort: 20, // `leader` reads that named a leader, when there are observers
  stopHolders: opts['stop-holders'],
  failOnStarvation: opts['fail-on-starvation'] ?? FAIL_ON_STARVATION,
  faultFilter: opts.faults ? opts.faults.split(',').map((x) => x.trim()).filter(Boolean) : null,
  seed,
};

const t0 = nowUs();
const say = (msg) => console.log(`[${((nowUs() - t0) / 1e6).toFixed(1).padStart(6)} s] ${msg}`);

// The agents' settings (over the fixture's defaults), then the --agent-arg ones over these.
const agentSettings = new Map([
  ['restart-quarantine', 'true'],
  ['max-ttl-ms', String(cfg.maxTtlMs)],
  ['default-ttl-ms', String(cfg.ttlMinMs)],
  ['min-ttl-ms', '100'],
  ['reconnect-max-backoff-ms', '250'],
  ['health-interval-ms', '250'],
  ['scan-interval-ms', '0'],
  ['log-level', 'info'],
]);
for (const a of opts['agent-arg']) {
  const eq = a.indexOf('=');
  if (eq < 0) throw new Error(`--agent-arg ${a}: give NAME=VALUE`);
  agentSettings.set(a.slice(0, eq).replace(/^--/, ''), a.slice(eq + 1));
}
const agentArgs = [...agentSettings].flatMap(([k, v]) => [`--${k}`, v]);
cfg.nodeTimeoutMs = Number(agentSettings.get('node-timeout-ms') ?? 50); // the agent's default
cfg.maxTtlMs = Number(agentSettings.get('max-ttl-ms'));
cfg.faultGapMs = cfg.maxTtlMs + 1000;
// Grants should resume within max_ttl + 1 s of each heal (reported); beyond resumeFailMs without
// one, the run fails: the goal itself in long mode, only a total lack of progress in short mode.
cfg.resumeGoalMs = cfg.maxTtlMs + 1000;
cfg.resumeFailMs = opts.long ? cfg.resumeGoalMs : RESUME_FAIL_FACTOR * cfg.resumeGoalMs;


// The lock kind each hold client's kind contends as (fairness.mjs WAIT_KINDS).
const CONTENDS_AS = { mutex: 'mutex', semaphore: 'semaphore', read: 'read-write shared',
  write: 'read-write exclusive' };

// The last lines of a log, indented, for a report that may be all a reader gets to see.
function logTail(file, lines = 8) {
  let text = '';
  try { text = fs.readFileSync(file, 'utf8'); } catch (err) { return `    (${err.message})`; }
  return text.trimEnd().split('\n').slice(-lines).map((l) => `    ${l}`).join('\n');
}

// Client processes: spawned with their logs in outDir; exited() tells how each ended. Each that
// contends for locks has contends: {kind, resources, wait_ms} (observers have none).
async function startClients(agents, registerSocket) {
  const clients = [];
  const common = {
    ttlMinMs: cfg.ttlMinMs, ttlMaxMs: cfg.ttlMaxMs, waitMs: cfg.waitMs,
    minValidityLeftMs: cfg.minValidityLeftMs, holdMaxMs: cfg.holdMaxMs,
    detachShare: cfg.detachShare, reentrantShare: cfg.reentrantShare,
  };
  const spawn = async (script, name, agent, config, register, kind) => {
    // Detached leases are released through the next agent half the time (client.mjs).
    const next = agents[(agents.indexOf(agent) + 1) % agents.length];
    const leaseVia = next !== agent ? next.socketPath : undefined;
    const argv = [process.execPath, script, name, agent.label, agent.socketPath, registerSocket,
      JSON.stringify({ ...config, leaseVia, seed: subSeed(cfg.seed, `client ${name}`) })];
    const child = await spawnLogged(argv, path.join(outDir, `client-${name}.log`));
    const contends = kind
      ? { kind, resources: config.resources ?? config.names, wait_ms: config.waitMs } : null;
    clients.push({ name, agent: agent.label, child, register, contends });
  };
  for (let i = 0; i < cfg.clients; i++) {
    const agent = agents[i % agents.length];
    const slow = i < agents.length;
    await spawn(clientScript, slow ? `slow${i}` : `c${i}`, agent, {
      ...common,
      resources: slow ? cfg.slowResources : cfg.fastResources,
      holdShareMax: slow ? cfg.slowHoldShare : 0,
    }, true, 'fenced mutex');
  }
  for (const k of cfg.holdKinds) {
    for (let j = 0; j < k.clients; j++) {
      await spawn(clientScript, `${k.prefix}${j}`, agents[(j + 1) % agents.length], {
        ...common, resources: k.resources ?? [k.resource], several: k.several,
        acquire: k.acquire, holdMaxMs: k.holdMaxMs,
        holdShareMax: k.holdShareMax, idleMaxMs: k.idleMaxMs,
        detachShare: k.detachShare ?? common.detachShare,
      }, false, CONTENDS_AS[k.kind]);
    }
  }
  const e = cfg.elections;
  for (let j = 0; j < e.candidates; j++) {
    await spawn(candidateScript, `ld${j}`, agents[(j + 2) % agents.length],
      { ...e, role: 'candidate' }, false, 'election');
  }
  // Observers watch the candidates' names: none without candidates.
  for (let j = 0; j < (e.candidates > 0 ? Math.min(e.observers, agents.length) : 0); j++) {
    await spawn(candidateScript, `ob${j}`, agents[j], { ...e, role: 'observer' }, false);
  }
  return clients;
}

// The run-level problems of the hold clients, the candidates and the observers: a hold or a
// leader granted within max_ttl of the masters' start (the restart quarantine), too few holds
// of a kind, leaders or leader reads in short mode.
function holdProblems(register, mastersStarted) {
  const { holds, leaders, observed } = register;
  const problems = [];
  const first = [...holds, ...leaders].reduce((a, g) => (a && a.t_granted <= g.t_granted ? a : g), null);
  if (first && (first.t_granted - mastersStarted) / 1000 < cfg.maxTtlMs) {
    problems.push(`a ${first.mode ?? 'leader'} hold ` +
      `${((first.t_granted - mastersStarted) / 1000).toFixed(0)} ms after the masters started: the ` +
      `restart quarantine (max_ttl ${cfg.maxTtlMs} ms) was not honoured`);
  }
  if (mode !== 'short') return problems;
  if (cfg.elections.candidates > 0 && leaders.length < cfg.minLeadersShort) {
    problems.push(`only ${leaders.length} leaders (short mode wants >= ${cfg.minLeadersShort})`);
  }
  const named = observed.filter((o) => o.kind === 'read' && o.leader).length;
  if (cfg.elections.candidates > 0 && cfg.elections.observers > 0 && named < cfg.minLeaderReadsShort) {
    problems.push(`only ${named} leader reads named a leader (short mode wants >= ` +
      `${cfg.minLeaderReadsShort})`);
  }
  const modes = { mutex: 'exclusive', semaphore: 'permit', read: 'shared', write: 'exclusive' };
  for (const k of cfg.holdKinds) {
    const mine = k.resources ?? [k.resource];
    const n = holds.filter((g) => g.mode === modes[k.kind] && mine.includes(g.resource)).length;
    if (k.clients > 0 && n < cfg.minHoldsShort) {
      problems.push(`only ${n} ${k.kind} holds of ${mine} (short mode wants >= ` +
        `${cfg.minHoldsShort})`);
    }
  }
  return problems;
}

// Grants of every kind so far: the register clients' grants, the holds, the leaders.
const allGrants = (register) => register.grants.length + register.holds.length + register.leaders.length;

// Progress every 10 s: grants so far, the rate over the last 10 s, failures.
function startProgress(register) {
  let last = 0;
  const timer = setInterval(() => {
    const n = register.grants.length;
    const failures = [...register.failures.values()].reduce((a, b) => a + b, 0);
    say(`progress: ${n} grants (${((n - last) / 10).toFixed(0)}/s), ${register.holds.length} holds, ` +
      `${register.leaders.length} leaders, ${failures} acquire failures`);
    last = n;
  }, 10000);
  return () => clearInterval(timer);
}

async function main() {
  fs.rmSync(outDir, { recursive: true, force: true });
  fs.mkdirSync(outDir, { recursive: true });
  const workDir = makeTempDir('lw-safety-');
  const register = new FencedRegister(path.join(workDir, 'register.sock'));
  let cluster = null;
  let proxy = null;
  const agents = [];
  let clients = [];
  const problems = [];
  try {
    say(`${mode} mode, seed ${cfg.seed} (repeat its choices with LOCKWARDEN_SAFETY_SEED=${cfg.seed} ` +
      'or --seed)');
    say(`agent binary ${agentBinary}; output in ${outDir}`);
    await register.start();
    // Every master's wall clock can be moved (clock_shift.c), and every agent reaches every
    // master through the fault proxy, one link each (net_faults.mjs).
    const shim = buildClockShift(workDir);
    const clocks = Array.from({ length: cfg.masters },
      (_, i) => new ClockShift(path.join(workDir, `clock-m${i}`)));
    const mastersStarted = nowUs();
    const tls = opts.tls ? makeTlsFiles(workDir) : null;
    cluster = await RedisCluster.start(cfg.masters,
      { envFor: (i) => clockShiftEnv(shim, clocks[i].file), tls });
    say(`masters up${tls ? ' (TLS only)' : ''}: ${cluster.masters.map((m) => m.address).join(' ')}`);
    const links = [];
    for (let a = 0; a < cfg.agents; a++) {
      cluster.masters.forEach((m, j) => links.push({ id: linkId(a, j), target: m.address }));
    }
    proxy = await FaultProxy.start({ links, logPath: path.join(outDir, 'proxy.log') });
    for (let i = 0; i < cfg.agents; i++) {
      // The proxy's address is 127.0.0.1, which the masters' certificate names.
      const scheme = tls ? 'rediss' : 'redis';
      const urls = cluster.masters.map((_, j) => `${scheme}://${proxy.address(linkId(i, j))}`);
      const tlsArgs = tls ? ['--redis-tls-ca-file', tls.ca] : [];
      agents.push(await Agent.start({ urls }, {
        token: false, label: `a${i}`, logDir: outDir, extraArgs: [...agentArgs, ...tlsArgs],
      }));
    }
    say(`${agents.length} agents ready; starting ${cfg.clients} clients`);
    clients = await startClients(agents, register.socketPath);
    // A generous deadline: the first grant comes about max_ttl after the masters started.
    await waitUntil(() => register.grants.length > 0 || clients.some((c) => c.child.exitCode !== null), {
      timeoutMs: cfg.maxTtlMs + 60000, intervalMs: 20, what: 'the first grant',
    });
    const early = clients.find((c) => c.child.exitCode !== null);
    if (early) throw new Error(`client ${early.name} exited with ${early.child.exitCode}; see its log`);
    // Every master is fresh: restart quarantine must hold every grant back for max_ttl.
    const firstGrantMs = (register.grants[0].t_granted - mastersStarted) / 1000;
    say(`first grant ${firstGrantMs.toFixed(0)} ms after the masters started`);
    if (agentSettings.get('restart-quarantine') === 'true' && firstGrantMs < cfg.maxTtlMs) {
      problems.push(`a grant ${firstGrantMs.toFixed(0)} ms after the masters started: the restart ` +
        `quarantine (max_ttl ${cfg.maxTtlMs} ms) was not honoured`);
    }

    const trafficStart = nowUs();
    const stopProgress = startProgress(register);
    await pause(cfg.warmupMs);
    // The client the register stops between read and write is a register client.
    // The holder stopped is a hold client or a candidate, the kinds in turn (sem0, rd0, ld0,
    // wr0, sem1, ...).
    const clientNames = clients.filter((c) => c.register).map((c) => c.name);
    const kindOrder = ['mx', 'sem', 'rd', 'ld', 'wr'];
    const holderNames = clients.map((c) => c.name).filter((n) => kindOrder.includes(n.replace(/\d+$/, '')))
      .sort((a, b) => Number(a.match(/\d+$/)) - Number(b.match(/\d+$/)) ||
        kindOrder.indexOf(a.replace(/\d+$/, '')) - kindOrder.indexOf(b.replace(/\d+$/, '')));
    const ctx = { cluster, agents, register, cfg, say, clientNames, holderNames, proxy, clocks };
    const longDone = () => (cfg.longSeconds
      ? nowUs() - trafficStart >= cfg.longSeconds * 1e6
      : allGrants(register) >= cfg.longGrants);
    const faults = await runFaults(ctx, (done) =>
      opts.long ? longDone() : done.length >= cfg.shortCycles * faultsFor(ctx).length);
    stopProgress();

    say('stopping the clients');
    register.broadcastStop();
    // Each finishes its cycle (an acquire waits up to waitMs) and exits: a generous deadline.
    for (const c of clients) {
      const exit = await Promise.race([c.child.exited, pause(cfg.waitMs + 30000, null)]);
      if (!exit) {
        problems.push(`client ${c.name} did not stop; killed`);
        await stopChild(c.child, 'SIGKILL');
      } else if (exit.code !== 0) {
        problems.push(`client ${c.name} exited with ${exit.code ?? exit.signal}; the end of ` +
          `client-${c.name}.log:\n${logTail(path.join(outDir, `client-${c.name}.log`))}`);
      }
    }
    const trafficEnd = nowUs();
    if (mode === 'short' && register.grants.length < cfg.minGrantsShort) {
      problems.push(`only ${register.grants.length} grants (short mode wants >= ${cfg.minGrantsShort})`);
    }
    problems.push(...holdProblems(register, mastersStarted));
    if (mode === 'long' && !cfg.longSeconds && allGrants(register) < cfg.longGrants) {
      problems.push(`only ${allGrants(register)} grants of all kinds (long mode wants >= ` +
        `${cfg.longGrants})`);
    }
    const h = {
      mode, cfg, t0, trafficStart, trafficEnd, firstGrantMs, faults,
      failures: Object.fromEntries(register.failures),
      resources: Object.fromEntries(register.resources),
      grants: register.grants, holds: register.holds, ops: register.ops,
      leaders: register.leaders, observed: register.observed, failed: register.failed,
      roster: clients.filter((c) => c.contends)
        .map((c) => ({ name: c.name, agent: c.agent, ...c.contends })),
    };
    const checks = analyze(h);
    const { lines, pass } = summaryLines(h, checks, problems, mode);
    console.log(`\n${lines.join('\n')}`);
    fs.writeFileSync(path.join(outDir, 'summary.txt'), `${lines.join('\n')}\n`);
    writeHistory(path.join(outDir, 'history.json'), h, checks, problems);
    say(`history: ${path.join(outDir, 'history.json')}`);
    return pass ? 0 : 1;
  } finally {
    for (const c of clients) await stopChild(c.child, 'SIGKILL');
    for (const a of agents) await a.stop();
    if (proxy) await proxy.stop();
    if (cluster) await cluster.stop();
    await register.close();
    removeTempDir(workDir);
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`safety checker: the run could not be completed: ${err.stack || err}`);
    process.exit(2);
  },
);
