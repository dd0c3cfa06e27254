#!/usr/bin/env node
// Jepsen-style safety checker (issue 5): several agents over the same 5 real redis-server
// masters, client processes contending for a few resources with fenced locks, a fenced register
// in this process, and faults (masters killed and restarted empty, a master and a client
// stopped past the ttl, an agent killed) while they run. See README.md here.
//
//   node tests/safety/checker.mjs            short mode (about 2 minutes)
//   node tests/safety/checker.mjs --long     until 100 000 grants, faults cycling
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
import { runFaults } from './faults.mjs';
import { FencedRegister, nowUs } from './register.mjs';
import { summaryLines, writeHistory } from './report.mjs';
import { pickSeed, subSeed } from './rng.mjs';

const { values: opts } = parseArgs({
  options: {
    long: { type: 'boolean', default: false },
    grants: { type: 'string' }, // long mode: stop after this many grants (default 100000)
    cycles: { type: 'string' }, // short mode: fault cycles (default 2)
    agents: { type: 'string', default: '3' },
    clients: { type: 'string', default: '9' },
    // An agent setting for this run, NAME=VALUE (e.g. node-timeout-ms=100); repeatable.
    'agent-arg': { type: 'string', multiple: true, default: [] },
    seed: { type: 'string' }, // overrides LOCKWARDEN_SAFETY_SEED
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
  maxTtlMs: 2000, // the agents' max_ttl_ms: also their restart quarantine
  waitMs: 3000,
  minValidityLeftMs: 100, // a client with less left skips the write
  holdMaxMs: 2, // a random pause between read and write, so that holders overlap if they can
  masterDownMs: 100, // restarted empty while the locks it held are still valid
  agentDownMs: 1000,
  faultGapMs: 5000, // plain traffic after each fault (> max_ttl: quarantines end in between)
  warmupMs: 4000,
  shortCycles: Number(opts.cycles || 3),
  longGrants: Number(opts.grants || 100000),
  minGrantsShort: 200,
  seed,
};
// Grants should resume within max_ttl + 1 s of each heal (reported); beyond resumeFailMs without
// one, the run fails: the goal itself in long mode, only a total lack of progress in short mode.
cfg.resumeGoalMs = cfg.maxTtlMs + 1000;
cfg.resumeFailMs = opts.long ? cfg.resumeGoalMs : RESUME_FAIL_FACTOR * cfg.resumeGoalMs;

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

// Client processes: spawned with their logs in outDir; exited() tells how each ended.
async function startClients(agents, registerSocket) {
  const clients = [];
  const common = {
    ttlMinMs: cfg.ttlMinMs, ttlMaxMs: cfg.ttlMaxMs, waitMs: cfg.waitMs,
    minValidityLeftMs: cfg.minValidityLeftMs, holdMaxMs: cfg.holdMaxMs,
  };
  for (let i = 0; i < cfg.clients; i++) {
    const agent = agents[i % agents.length];
    const slow = i < agents.length;
    const name = slow ? `slow${i}` : `c${i}`;
    const config = JSON.stringify({
      ...common,
      resources: slow ? cfg.slowResources : cfg.fastResources,
      holdShareMax: slow ? cfg.slowHoldShare : 0,
      seed: subSeed(cfg.seed, `client ${name}`),
    });
    const argv = [process.execPath, clientScript, name, agent.label, agent.socketPath, registerSocket, config];
    const child = await spawnLogged(argv, path.join(outDir, `client-${name}.log`));
    clients.push({ name, agent: agent.label, child });
  }
  return clients;
}

// Progress every 10 s: grants so far, the rate over the last 10 s, failures.
function startProgress(register) {
  let last = 0;
  const timer = setInterval(() => {
    const n = register.grants.length;
    const failures = [...register.failures.values()].reduce((a, b) => a + b, 0);
    say(`progress: ${n} grants (${((n - last) / 10).toFixed(0)}/s), ${failures} acquire failures`);
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
  const agents = [];
  let clients = [];
  const problems = [];
  try {
    say(`${mode} mode, seed ${cfg.seed} (repeat its choices with LOCKWARDEN_SAFETY_SEED=${cfg.seed} ` +
      'or --seed)');
    say(`agent binary ${agentBinary}; output in ${outDir}`);
    await register.start();
    const mastersStarted = nowUs();
    cluster = await RedisCluster.start(cfg.masters);
    say(`masters up: ${cluster.masters.map((m) => m.address).join(' ')}`);
    for (let i = 0; i < cfg.agents; i++) {
      agents.push(await Agent.start(cluster, {
        token: false, label: `a${i}`, logDir: outDir, extraArgs: agentArgs,
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
    const ctx = { cluster, agents, register, cfg, say, clientNames: clients.map((c) => c.name) };
    const faults = await runFaults(ctx, (done) =>
      opts.long
        ? register.grants.length >= cfg.longGrants
        : done.length >= cfg.shortCycles * 5);
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
        problems.push(`client ${c.name} exited with ${exit.code ?? exit.signal} (see client-${c.name}.log)`);
      }
    }
    const trafficEnd = nowUs();
    if (mode === 'short' && register.grants.length < cfg.minGrantsShort) {
      problems.push(`only ${register.grants.length} grants (short mode wants >= ${cfg.minGrantsShort})`);
    }
    if (mode === 'long' && register.grants.length < cfg.longGrants) {
      problems.push(`only ${register.grants.length} grants (long mode wants >= ${cfg.longGrants})`);
    }
    const h = {
      mode, cfg, t0, trafficStart, trafficEnd, firstGrantMs, faults,
      failures: Object.fromEntries(register.failures),
      resources: Object.fromEntries(register.resources),
      grants: register.grants, ops: register.ops,
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
