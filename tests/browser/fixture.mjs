// Test fixture for the real-browser tests of the operator page: real redis-server masters and
// the real lockwarden agent, as tests/support/ starts them for the C++ integration tests.
// Everything started here is stopped by the callers' after() hooks (useStack in browser.mjs
// registers them), and killed at process exit as a last resort.
//
// Environment:
//   LOCKWARDEN_BINARY           agent binary (default <repo>/build/lockwarden; CMake sets it)
//   LOCKWARDEN_TEST_OUTPUT_DIR  screenshots, agent logs (default <repo>/build/test-output/browser)
//
// The safety checker (tests/safety) uses it too: masters that can be killed (-9), restarted on
// the same port without persistence, paused (SIGSTOP) and resumed, given extra environment
// (RedisCluster.start's envFor: the clock shim); agents that can be killed and restarted on the
// same socket; spawnLogged/stopChild for its client processes.
//   LOCKWARDEN_CHROMIUM         browser binary (default /usr/bin/chromium)

import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as pause } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

import { LockClient, httpRequest, redisCommand } from './clients.mjs';
import {
  AdoptedProcess, fileFrom, fileTail, freePort, hasExited, makeTempDir, overrideFlags,
  removeTempDir, spawnLogged, stopChild,
} from './processes.mjs';

export {
  fileTail, freePort, hasExited, makeTempDir, removeTempDir, spawnLogged, stopChild,
} from './processes.mjs';

export const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..', '..');
export const agentBinary =
  process.env.LOCKWARDEN_BINARY || path.join(repoRoot, 'build', 'lockwarden');
export const outputDir =
  process.env.LOCKWARDEN_TEST_OUTPUT_DIR || path.join(repoRoot, 'build', 'test-output', 'browser');
export const chromiumPath = process.env.LOCKWARDEN_CHROMIUM || '/usr/bin/chromium';

// The short pauses between probes of a process that offers no readiness event (redis-server,
// the agent): polling intervals, never a stand-in for a condition.
const PROBE_PAUSE_MS = 10;

// How long to wait for something that will happen (a process starting, the agent seeing a
// master die, a lock appearing in its state): generous, so that a loaded machine (2 shared
// cores, a sanitizer build) passes the same way as an idle one. Only a failing test waits it out.
export const EVENT_TIMEOUT_MS = 20000;
// A process starting (redis-server, the agent and its masters becoming usable).
export const START_TIMEOUT_MS = 30000;

export function randomId(bytes = 6) {
  return crypto.randomBytes(bytes).toString('hex');
}

// Milliseconds left until deadline (at least 1, so a late check still runs once).
export function msUntil(deadline) {
  return Math.max(1, deadline - Date.now());
}

// An error that ends waitUntil at once instead of counting as "not yet".
export class GiveUp extends Error {}

// Polls fn until it returns a truthy value (which is returned) or timeoutMs passes. Errors fn
// throws count as "not yet", except GiveUp.
export async function waitUntil(fn, options = {}) {
  const { timeoutMs = EVENT_TIMEOUT_MS, intervalMs = 25, what = 'condition' } = options;
  const end = Date.now() + timeoutMs;
  let lastError;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      lastError = err;
    }
    if (Date.now() >= end) {
      const why = lastError ? ` (last error: ${lastError.message})` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await pause(intervalMs);
  }
}

// ---------------------------------------------------------------------------------------------
// Redis masters

class RedisMaster {
  // env: the redis-server process's environment, at every start and restart.
  // tls: {cert, key, ca} (file paths): TLS only (--port 0 --tls-port), rediss:// URLs.
  constructor(dir, env = process.env, tls = null) {
    this.dir = dir;
    this.env = env;
    this.tls = tls;
    this.tlsCa = tls ? fs.readFileSync(tls.ca) : null;
    this.port = 0;
    this.child = null;
  }

  get address() {
    return `127.0.0.1:${this.port}`;
  }

  get url() {
    return `${this.tls ? 'rediss' : 'redis'}://${this.address}`;
  }

  get running() {
    return this.child !== null && !hasExited(this.child);
  }

  // Starts redis-server on a free port; retries on another port if one was taken meanwhile.
  async start() {
    let why = '';
    for (let attempt = 0; attempt < 5; attempt++) {
      this.port = await freePort();
      if (await this.tryStart()) return;
      why = fileTail(path.join(this.dir, 'redis.log')) + fileTail(path.join(this.dir, 'redis.out'));
    }
    throw new Error(`cannot start redis-server after 5 attempts; last:\n${why}`);
  }

  // Starts a fresh redis-server (no persistence: it comes back empty) on the port it had, as
  // after a crash; rejects if the port was taken meanwhile.
  async restart() {
    if (this.running) throw new Error(`redis-server on port ${this.port} is still running`);
    if (await this.tryStart()) return;
    const why = fileTail(path.join(this.dir, 'redis.log'), 2048);
    throw new Error(`cannot restart redis-server on port ${this.port}:\n${why}`);
  }

  get pid() {
    return this.running ? this.child.pid : null;
  }

  // SIGSTOP / SIGCONT: the process keeps its data and its connections, but answers nothing.
  pause() {
    this.child.kill('SIGSTOP');
  }

  resume() {
    this.child.kill('SIGCONT');
  }

  async tryStart() {
    const listen = this.tls
      ? ['--port', '0', '--tls-port', String(this.port), '--tls-cert-file', this.tls.cert,
        '--tls-key-file', this.tls.key, '--tls-ca-cert-file', this.tls.ca,
        '--tls-auth-clients', 'no']
      : ['--port', String(this.port)];
    const argv = [
      'redis-server',
      ...listen,
      '--bind', '127.0.0.1',
      '--save', '',
      '--appendonly', 'no',
      '--daemonize', 'no',
      '--dir', this.dir,
      '--logfile', path.join(this.dir, 'redis.log'),
      '--protected-mode', 'no',
    ];
    const child = await spawnLogged(argv, path.join(this.dir, 'redis.out'), this.env);
    // redis-server has no readiness event: probe until it answers as this very process (not
    // some other server that took the port).
    const end = Date.now() + START_TIMEOUT_MS;
    while (Date.now() < end) {
      if (hasExited(child)) return false;
      try {
        const info = await redisCommand(this.port, ['INFO', 'server'],
          { timeoutMs: 200, tlsCa: this.tlsCa });
        const m = /process_id:(\d+)/.exec(info);
        if (m && Number(m[1]) === child.pid) {
          this.child = child;
          return true;
        }
      } catch {
        // not listening yet
      }
      await pause(PROBE_PAUSE_MS);
    }
    await stopChild(child, 'SIGKILL');
    throw new Error(
      `redis-server on port ${this.port} did not answer within ${START_TIMEOUT_MS} ms`);
  }

  // kill -9, and wait until the process is gone.
  async kill() {
    if (!this.running) return;
    this.child.kill('SIGKILL');
    await this.child.exited;
  }

  command(args) {
    return redisCommand(this.port, args, { tlsCa: this.tlsCa });
  }
}

export class RedisCluster {
  constructor() {
    this.masters = [];
  }

  // options.envFor(i): extra environment variables for master i (merged over process.env),
  // kept for its restarts; e.g. clock_shift.mjs's clockShiftEnv. options.tls: {cert, key, ca}
  // for TLS-only masters (RedisMaster).
  static async start(n = 5, { envFor, tls } = {}) {
    const cluster = new RedisCluster();
    try {
      // One at a time: each picks a free port, and parallel picks could collide.
      for (let i = 0; i < n; i++) {
        const env = envFor ? { ...process.env, ...envFor(i) } : process.env;
        const master = new RedisMaster(makeTempDir('lw-browser-redis-'), env, tls);
        cluster.masters.push(master);
        await master.start();
      }
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    return cluster;
  }

  get urls() {
    return this.masters.map((m) => m.url);
  }

  master(i) {
    return this.masters[i];
  }

  async kill(i) {
    await this.masters[i].kill();
  }

  async stop() {
    await Promise.all(
      this.masters.map(async (m) => {
        if (m.child) await stopChild(m.child, 'SIGKILL');
        removeTempDir(m.dir);
      }),
    );
  }
}

// ---------------------------------------------------------------------------------------------
// The agent

export class Agent {
  // options: token (true: generate one; a string: use it; false: actions disabled),
  // scanIntervalMs, extraArgs (a flag given there replaces the default of the same name),
  // label (names the copy of the log kept in logDir), logDir (default outputDir),
  // readyTimeoutMs (how long it may take to be ready, at each start: add the restart quarantine
  // when it is on, as the fresh masters count only after max_ttl).
  static async start(
    cluster,
    {
      token = true, scanIntervalMs = 500, extraArgs = [], label, logDir = outputDir,
      readyTimeoutMs = START_TIMEOUT_MS,
    } = {},
  ) {
    if (!fs.existsSync(agentBinary)) {
      throw new Error(
        `agent binary ${agentBinary} not found: build it ` +
          '(cmake --build build --target lockwarden) or set LOCKWARDEN_BINARY',
      );
    }
    const agent = new Agent();
    agent.dir = makeTempDir('lw-browser-agent-');
    agent.label = label || `agent-${randomId(3)}`;
    agent.logDir = logDir;
    agent.socketPath = path.join(agent.dir, 'agent.sock');
    agent.logPath = path.join(agent.dir, 'agent.log');
    agent.token = token === true ? randomId(24) : token || null;
    agent.readyTimeoutMs = readyTimeoutMs;
    const argv = [
      agentBinary, 'serve',
      '--socket', agent.socketPath,
      '--log-level', 'debug',
      '--admin-listen', '127.0.0.1:0',
      '--scan-interval-ms', String(scanIntervalMs),
      '--health-interval-ms', '250',
      // Every master here is fresh: restart quarantine would keep them all out of quorum for
      // max_ttl. A test that wants it passes --restart-quarantine true.
      '--restart-quarantine', 'false',
    ];
    for (const url of cluster.urls) argv.push('--master', url);
    if (agent.token) {
      const tokenFile = path.join(agent.dir, 'admin.token');
      fs.writeFileSync(tokenFile, `${agent.token}\n`, { mode: 0o600 });
      argv.push('--admin-token-file', tokenFile);
    }
    agent.argv = overrideFlags(argv, extraArgs);
    // The agent reads every LOCKWARDEN_* variable as a setting and refuses unknown ones, such as
    // this harness's LOCKWARDEN_BINARY: it gets none.
    agent.env = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('LOCKWARDEN_')),
    );
    try {
      await agent.spawn();
    } catch (err) {
      await agent.stop();
      throw err;
    }
    return agent;
  }

  // Starts the process (again) with the same arguments, and waits until it is ready.
  async spawn() {
    const logOffset = fs.existsSync(this.logPath) ? fs.statSync(this.logPath).size : 0;
    try {
      this.child = await spawnLogged(this.argv, this.logPath, this.env);
      await this.waitReady(this.readyTimeoutMs, logOffset);
    } catch (err) {
      throw new Error(`${err.message}\n--- agent.log ---\n${fileTail(this.logPath)}`);
    }
  }

  get running() {
    return Boolean(this.child) && !hasExited(this.child);
  }

  // kill -9 (nothing released, nothing flushed), and wait until the process is gone.
  async kill() {
    if (!this.running) return;
    this.child.kill('SIGKILL');
    await this.child.exited;
  }

  // After kill(): the same agent again, on the same socket, masters and flags.
  async restart() {
    if (this.running) throw new Error('the agent is still running');
    await this.spawn();
  }

  // An in-place upgrade (docs/upgrade.md): the agent hands its socket, connections and locks to
  // a new process of its binary, which this object follows from then on (kill, restart, its
  // admin port). Returns the new process's reply; throws when the upgrade failed.
  async upgrade() {
    const logOffset = fs.statSync(this.logPath).size;
    const client = await LockClient.connect(this.socketPath);
    let reply;
    try {
      reply = await client.call({ op: 'upgrade' }, { timeoutMs: 60000 });
    } finally {
      client.close();
    }
    if (!reply.ok) throw new Error(`the upgrade of ${this.label} failed: ${reply.message}`);
    await this.child.exited;
    this.child = new AdoptedProcess(reply.pid);
    // The new process bound --admin-listen 127.0.0.1:0 again, before it answered.
    const bound = [...fileFrom(this.logPath, logOffset).matchAll(/admin HTTP on [^\s:]+:(\d+)/g)];
    if (bound.length > 0) this.adminPort = Number(bound.at(-1)[1]);
    return reply;
  }

  get baseUrl() {
    return `http://127.0.0.1:${this.adminPort}`;
  }

  // The agent binds --admin-listen 127.0.0.1:0 and logs the port it got
  // ("admin HTTP on 127.0.0.1:PORT ..."); then it is ready once /readyz says a quorum of
  // masters is up and the socket answers a ping.
  // Only the log written since logOffset counts (a restarted agent appends to the same log).
  async waitReady(timeoutMs, logOffset = 0) {
    const end = Date.now() + timeoutMs;
    const left = () => Math.max(1, end - Date.now());
    const exitedError = () =>
      new GiveUp(`agent exited (code ${this.child.exitCode}, signal ${this.child.signalCode})`);
    this.adminPort = await waitUntil(
      () => {
        if (hasExited(this.child)) throw exitedError();
        const m = /admin HTTP on [^\s:]+:(\d+)/.exec(fileFrom(this.logPath, logOffset));
        return m && Number(m[1]);
      },
      { timeoutMs: left(), intervalMs: PROBE_PAUSE_MS, what: 'the agent to log its admin port' },
    );
    await waitUntil(
      async () => {
        if (hasExited(this.child)) throw exitedError();
        const res = await httpRequest(`${this.baseUrl}/readyz`);
        return res.status === 200;
      },
      { timeoutMs: left(), intervalMs: PROBE_PAUSE_MS, what: 'GET /readyz to answer 200' },
    );
    const client = await waitUntil(() => LockClient.connect(this.socketPath), {
      timeoutMs: left(),
      intervalMs: PROBE_PAUSE_MS,
      what: 'the agent socket',
    });
    try {
      const pong = await client.call({ op: 'ping' });
      if (!pong.ok) throw new Error(`ping answered ${JSON.stringify(pong)}`);
    } finally {
      client.close();
    }
  }

  // GET path -> parsed JSON body. Sends the token when the agent has one: an agent listening
  // beyond loopback needs it for reads too (on loopback it is ignored).
  async getJson(p) {
    const headers = this.token ? { Authorization: `Bearer ${this.token}` } : {};
    const res = await httpRequest(this.baseUrl + p, { headers });
    if (res.status !== 200) throw new Error(`GET ${p}: HTTP ${res.status}: ${res.text}`);
    return JSON.parse(res.text);
  }

  state() {
    return this.getJson('/api/v1/state');
  }

  // Runs body(client) with a LockClient connected to the agent's socket, then closes it.
  async withClient(body) {
    const client = await LockClient.connect(this.socketPath);
    try {
      return await body(client);
    } finally {
      client.close();
    }
  }

  // POST an admin action the way curl would (no browser headers): {status, body}.
  async post(p, body, { token = this.token } = {}) {
    const headers = { 'Content-Type': 'application/json' };
    if (token) headers.Authorization = `Bearer ${token}`;
    const res = await httpRequest(this.baseUrl + p, {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
    });
    let parsed;
    try {
      parsed = JSON.parse(res.text);
    } catch {
      parsed = res.text;
    }
    return { status: res.status, body: parsed };
  }

  // Stops the agent (SIGTERM, then SIGKILL), keeps a copy of its log in outputDir, removes its
  // temp dir.
  async stop() {
    if (this.child) await stopChild(this.child, 'SIGTERM', 3000);
    if (this.dir) {
      try {
        fs.mkdirSync(this.logDir, { recursive: true });
        fs.copyFileSync(this.logPath, path.join(this.logDir, `${this.label}.log`));
      } catch {
        // no log to keep
      }
      removeTempDir(this.dir);
      this.dir = null;
    }
  }
}
