// A TCP fault proxy for the safety checker: every (agent, master) link is a listener on
// 127.0.0.1:<port> that forwards each accepted connection to the link's master, and a fault set
// on the link holds, delays or resets what passes. The forwarding runs in a child process
// (fault_proxy_child.mjs), on its own core, not in the checker's event loop.
//
//   const proxy = await FaultProxy.start({ links: [{ id: 'a0-m1', target: '127.0.0.1:6379' }],
//     logPath });                       // resolves once every listener is bound
//   proxy.address('a0-m1')              // '127.0.0.1:PORT': what the agent connects to
//   await proxy.set(['a0-m1'], fault)   // resolves once the child has the fault in effect
//   await proxy.stats()                 // {id: {connections, open, bytesUp, bytesDown,
//                                       //       queuedUp, queuedDown}}
//   await proxy.stop()
//
// The faults (per link; direction 'both' by default, 'up' = client → master: the requests,
// 'down' = master → client: the replies; the other direction passes):
//   {mode: 'pass'}                  forward at once; what a hold queued is flushed first, in
//                                   order (a delayed chunk still leaves at its own due time)
//   {mode: 'delay', ms, direction}  each chunk leaves ms after it was read, in order
//   {mode: 'hold', direction}       a partition that heals as TCP does: what is read is queued
//                                   until the mode changes, then flushed in order. Nothing is
//                                   dropped from a stream (that would desynchronise RESP)
//   {mode: 'reset'}                 every connection of the link is reset (RST) on both sides,
//                                   its queues dropped, and every new one is reset at once,
//                                   until the mode changes
// A source's end or close is passed on after the data queued before it. A failed connect to the
// master, or the master closing, closes the client's side (after its queued data); the client
// closing closes the master's side the same way.
//
// Counters (stats): connections accepted so far, open ones, bytes read from the clients (bytesUp)
// and from the master (bytesDown), and of those the bytes queued now, not yet written on
// (queuedUp, queuedDown): a byte counted as queued has not reached its receiver.
//
// If the child dies, every pending call and every later one rejects with the reason.

import { fork } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const childPath = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fault_proxy_child.mjs');

const MODES = new Set(['pass', 'delay', 'hold', 'reset']);
const DIRECTIONS = new Set(['both', 'up', 'down']);

// How long stop() lets the child exit on its own before SIGKILL.
const STOP_GRACE_MS = 3000;

// Children still running, killed if this process exits without stop().
const liveChildren = new Set();
process.on('exit', () => {
  for (const child of liveChildren) child.kill('SIGKILL');
});

// The fault as the child applies it: validated, with its direction filled in.
function normalizeFault(fault) {
  const { mode, ms, direction = 'both' } = fault ?? {};
  if (!MODES.has(mode)) throw new Error(`fault proxy: unknown mode ${JSON.stringify(mode)}`);
  if (!DIRECTIONS.has(direction)) {
    throw new Error(`fault proxy: unknown direction ${JSON.stringify(direction)}`);
  }
  if (mode === 'delay') {
    if (!Number.isFinite(ms) || ms < 0) {
      throw new Error(`fault proxy: delay needs ms >= 0, got ${ms}`);
    }
    return { mode, ms, direction };
  }
  return { mode, direction: mode === 'hold' ? direction : 'both' };
}

function fileTail(file, maxBytes = 2048) {
  try {
    const text = fs.readFileSync(file, 'utf8');
    return text.length > maxBytes ? text.slice(-maxBytes) : text;
  } catch {
    return '';
  }
}

export class FaultProxy {
  constructor(child, logPath) {
    this.child = child;
    this.logPath = logPath;
    this.ports = new Map(); // link id -> port
    this.pending = new Map(); // request id -> {resolve, reject, op}
    this.nextId = 1;
    this.dead = null; // the Error every call rejects with once the child is gone
    this.stopping = false;
    this.exited = new Promise((resolve) => {
      this.markDead = (how) => {
        if (this.dead) return;
        liveChildren.delete(child);
        const expected = this.stopping ? '' : ' unexpectedly';
        const tail = logPath ? fileTail(logPath) : '';
        this.dead = new Error(`fault proxy child (pid ${child.pid}) exited${expected} (${how})` +
          (tail ? `; the end of ${logPath}:\n${tail}` : ''));
        for (const { reject, op } of this.pending.values()) {
          reject(new Error(`fault proxy ${op}: ${this.dead.message}`));
        }
        this.pending.clear();
        resolve();
      };
    });
    child.once('exit', (code, signal) =>
      this.markDead(signal ? `signal ${signal}` : `code ${code}`));
    // A child that could not be started has no exit event; a failed send also shows up here,
    // and the exit that follows rejects the calls.
    child.on('error', (err) => {
      if (child.pid === undefined) this.markDead(`not started: ${err.message}`);
    });
    child.on('message', (msg) => {
      const call = this.pending.get(msg.id);
      if (!call) return;
      this.pending.delete(msg.id);
      if (msg.ok) call.resolve(msg.result);
      else call.reject(new Error(`fault proxy ${call.op}: ${msg.error}`));
    });
  }

  // links: [{id, target: 'host:port'}]; logPath: where the child's log and its stderr go
  // (appended; without it, its stderr is inherited and its log dropped).
  static async start({ links, logPath } = {}) {
    if (!Array.isArray(links) || links.length === 0) throw new Error('fault proxy: no links');
    const fd = logPath ? fs.openSync(logPath, 'a') : null;
    const stdio = fd === null ? ['ignore', 'ignore', 'inherit', 'ipc'] : ['ignore', fd, fd, 'ipc'];
    const child = fork(childPath, [], { stdio, serialization: 'json' });
    if (fd !== null) fs.closeSync(fd);
    liveChildren.add(child);
    const proxy = new FaultProxy(child, logPath);
    try {
      const { ports } = await proxy.request('start', {
        links: links.map(({ id, target }) => ({ id: String(id), target: String(target) })),
      });
      for (const [id, port] of Object.entries(ports)) proxy.ports.set(id, port);
    } catch (err) {
      await proxy.stop();
      throw err;
    }
    return proxy;
  }

  request(op, args = {}) {
    if (this.dead) return Promise.reject(new Error(`fault proxy ${op}: ${this.dead.message}`));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, op });
      this.child.send({ id, op, ...args }, (err) => {
        if (!err || !this.pending.has(id)) return;
        this.pending.delete(id);
        reject(new Error(`fault proxy ${op}: cannot reach the child: ${err.message}`));
      });
    });
  }

  // '127.0.0.1:PORT' of link id.
  address(id) {
    const port = this.ports.get(id);
    if (port === undefined) throw new Error(`fault proxy: no link ${JSON.stringify(id)}`);
    return `127.0.0.1:${port}`;
  }

  port(id) {
    this.address(id);
    return this.ports.get(id);
  }

  get ids() {
    return [...this.ports.keys()];
  }

  // Applies fault to the links ids (an id or an array); resolves once it is in effect.
  async set(ids, fault) {
    const list = Array.isArray(ids) ? ids : [ids];
    await this.request('set', { ids: list, fault: normalizeFault(fault) });
  }

  // {id: {connections, open, bytesUp, bytesDown, queuedUp, queuedDown}} of ids (default: all).
  async stats(ids) {
    const list = ids === undefined ? undefined : Array.isArray(ids) ? ids : [ids];
    return this.request('stats', list ? { ids: list } : {});
  }

  // Closes every listener and connection and ends the child (SIGKILL if it does not exit).
  async stop() {
    if (this.dead) return;
    this.stopping = true;
    // The child exits once it has answered; one that does not (stopped, stuck) is killed.
    this.request('stop').catch(() => {});
    const timer = setTimeout(() => this.child.kill('SIGKILL'), STOP_GRACE_MS);
    await this.exited;
    clearTimeout(timer);
  }
}
