// The fault proxy's child process (forked by fault_proxy.mjs, which documents the faults): one
// TCP listener per link on 127.0.0.1, each accepted connection forwarded to the link's upstream,
// every byte passing through a queue per direction so that a fault can hold or delay it.
//
// IPC, parent → child (each with an id, answered by {id, ok: true, result} or {id, ok: false,
// error}):
//   {op: 'start', links: [{id, target: 'host:port'}]}   → result {ports: {id: port}}
//   {op: 'set', ids, fault}                             → result null, once it is in effect
//   {op: 'stats', ids}                                  → result {id: {connections, open, ...}}
//   {op: 'stop'}                                        → result null; the child then exits
// A parent that goes away (the IPC channel closes) ends the child.
//
// Log lines (stdout, which the parent points at its log file): `<CLOCK_MONOTONIC µs> <text>`.

import net from 'node:net';
import { performance } from 'node:perf_hooks';

const nowUs = () => Number(process.hrtime.bigint() / 1000n);
const log = (text) => process.stdout.write(`${nowUs()} ${text}\n`);

// Queued bytes of one direction of one connection beyond which its source is no longer read
// (as a full TCP window would stop the sender): a hold cannot grow the child without bound.
const QUEUE_HIGH_WATER = 4 << 20;

const links = new Map(); // id -> Link

function applies(fault, dir) {
  return fault.direction === 'both' || fault.direction === dir;
}

// One direction of one connection: what src sends, queued, then written to dst. Each chunk is
// due at its read time plus the delay in force when it was read; the head of the queue leaves
// when it is due and the link does not hold this direction, so the order is always kept. The
// source's end (or close) is queued behind its data as a marker.
class Pipe {
  constructor(conn, dir, src, dst) {
    Object.assign(this, { conn, dir, src, dst });
    this.queue = []; // {buf, due} or {end: true, due}
    this.queued = 0; // bytes in queue
    this.ended = false; // the end marker was queued
    this.endDelivered = false;
    this.dead = false; // dst is gone: whatever comes is dropped
    this.timer = null;
    this.pausedByUs = false;
  }

  get link() {
    return this.conn.link;
  }

  held() {
    const f = this.link.fault;
    return f.mode === 'hold' && applies(f, this.dir);
  }

  delayMs() {
    const f = this.link.fault;
    return f.mode === 'delay' && applies(f, this.dir) ? f.ms : 0;
  }

  onData(buf) {
    this.link.bytes[this.dir] += buf.length;
    if (this.dead) return;
    this.queue.push({ buf, due: performance.now() + this.delayMs() });
    this.queued += buf.length;
    this.pump();
  }

  // The source's end or close: delivered as dst.end() (dst.destroySoon() once the source is
  // closed) after the data queued before it.
  onEnd() {
    if (this.ended) return;
    this.ended = true;
    if (this.dead) return;
    this.queue.push({ end: true, due: performance.now() + this.delayMs() });
    this.pump();
  }

  // Delivers every chunk that may leave now, and arms a timer for the next one that is delayed.
  pump() {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    while (!this.dead && this.queue.length > 0 && !this.held()) {
      const item = this.queue[0];
      const wait = item.due - performance.now();
      if (wait > 0) {
        this.timer = setTimeout(() => {
          this.timer = null;
          this.pump();
        }, Math.ceil(wait));
        break;
      }
      if (this.dst.destroyed) {
        this.kill(); // its close event is still to come
        break;
      }
      this.queue.shift();
      if (item.end) {
        this.deliverEnd();
        break;
      }
      this.queued -= item.buf.length;
      this.dst.write(item.buf);
    }
    this.throttle();
  }

  deliverEnd() {
    this.endDelivered = true;
    if (this.dst.destroyed) return;
    if (this.src.destroyed) this.dst.destroySoon();
    else this.dst.end();
  }

  // Stops reading src while the queue or dst's write buffer is full, reads again once not.
  throttle() {
    const full = !this.dead && (this.queued > QUEUE_HIGH_WATER || this.dst.writableNeedDrain);
    if (full && !this.pausedByUs) {
      this.pausedByUs = true;
      this.src.pause();
    } else if (!full && this.pausedByUs) {
      this.pausedByUs = false;
      this.src.resume();
    }
  }

  // dst is gone (closed, or reset by the proxy): the queue is dropped.
  kill() {
    this.dead = true;
    this.queue = [];
    this.queued = 0;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.throttle();
  }
}

class Connection {
  constructor(link, n, client) {
    this.link = link;
    this.name = `${link.id} #${n}`;
    this.client = client;
    const [host, port] = link.target;
    // No Nagle on either side: a small write waiting for the ACK of the one before would add a
    // delayed-ACK wait to every pipelined command that no fault asked for.
    this.upstream = net.connect({ host, port, allowHalfOpen: true, noDelay: true });
    this.up = new Pipe(this, 'up', client, this.upstream);
    this.down = new Pipe(this, 'down', this.upstream, client);
    this.closed = 0;
    this.wire(client, this.up, this.down, 'client');
    this.wire(this.upstream, this.down, this.up, 'upstream');
    this.upstream.on('drain', () => this.up.pump());
    client.on('drain', () => this.down.pump());
  }

  // sock feeds `from` and is the destination of `into`.
  wire(sock, from, into, side) {
    sock.on('data', (buf) => from.onData(buf));
    sock.on('end', () => from.onEnd());
    sock.on('error', (err) => log(`${this.name} ${side} error ${err.code || err.message}`));
    sock.on('close', () => {
      into.kill();
      from.onEnd();
      if (from.endDelivered && !from.dst.destroyed) from.dst.destroySoon();
      if (++this.closed === 2) {
        this.link.conns.delete(this);
        log(`${this.name} closed`);
      }
    });
  }

  // Both sides get an RST; the queues are dropped.
  reset() {
    this.up.kill();
    this.down.kill();
    resetSocket(this.client);
    resetSocket(this.upstream);
  }
}

function resetSocket(sock) {
  if (sock.destroyed) return;
  try {
    sock.resetAndDestroy();
  } catch {
    sock.destroy();
  }
}

function parseTarget(target) {
  const at = target.lastIndexOf(':');
  const port = Number(target.slice(at + 1));
  if (at <= 0 || !Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new Error(`bad target ${JSON.stringify(target)}: want host:port`);
  }
  return [target.slice(0, at).replace(/^\[(.*)\]$/, '$1'), port];
}

class Link {
  constructor({ id, target }) {
    this.id = id;
    this.target = parseTarget(target);
    this.fault = { mode: 'pass', direction: 'both' };
    this.conns = new Set();
    this.accepted = 0;
    this.bytes = { up: 0, down: 0 };
    this.server = net.createServer({ allowHalfOpen: true, noDelay: true },
      (sock) => this.accept(sock));
  }

  listen() {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => {
        this.server.off('error', reject);
        this.server.on('error', (err) => log(`${this.id} listener error ${err.message}`));
        resolve(this.server.address().port);
      });
    });
  }

  accept(sock) {
    const n = ++this.accepted;
    sock.on('error', () => {}); // a reset client; its connection logs what matters
    if (this.fault.mode === 'reset') {
      log(`${this.id} #${n} accepted and reset`);
      resetSocket(sock);
      return;
    }
    log(`${this.id} #${n} accepted`);
    this.conns.add(new Connection(this, n, sock));
  }

  set(fault) {
    this.fault = fault;
    if (fault.mode === 'reset') {
      for (const conn of this.conns) conn.reset();
      return;
    }
    for (const conn of this.conns) {
      conn.up.pump();
      conn.down.pump();
    }
  }

  stats() {
    let queuedUp = 0;
    let queuedDown = 0;
    for (const conn of this.conns) {
      queuedUp += conn.up.queued;
      queuedDown += conn.down.queued;
    }
    return { connections: this.accepted, open: this.conns.size, bytesUp: this.bytes.up,
      bytesDown: this.bytes.down, queuedUp, queuedDown };
  }

  close() {
    this.server.close();
    for (const conn of this.conns) {
      conn.up.kill();
      conn.down.kill();
      conn.client.destroy();
      conn.upstream.destroy();
    }
  }
}

function linksOf(ids) {
  return ids.map((id) => {
    const link = links.get(id);
    if (!link) throw new Error(`no link ${JSON.stringify(id)}`);
    return link;
  });
}

function describe(fault) {
  if (fault.mode === 'delay') return `delay ${fault.ms} ms ${fault.direction}`;
  if (fault.mode === 'hold') return `hold ${fault.direction}`;
  return fault.mode;
}

const handlers = {
  async start({ links: specs }) {
    const ports = {};
    for (const spec of specs) {
      if (links.has(spec.id)) throw new Error(`link ${JSON.stringify(spec.id)} given twice`);
      const link = new Link(spec);
      links.set(spec.id, link);
      ports[spec.id] = await link.listen();
      log(`${spec.id} listening on 127.0.0.1:${ports[spec.id]} -> ${spec.target}`);
    }
    return { ports };
  },
  set({ ids, fault }) {
    const targets = linksOf(ids);
    for (const link of targets) link.set(fault);
    log(`set ${ids.join(',')}: ${describe(fault)}`);
    return null;
  },
  stats({ ids }) {
    const out = {};
    for (const link of linksOf(ids ?? [...links.keys()])) out[link.id] = link.stats();
    return out;
  },
  stop() {
    for (const link of links.values()) link.close();
    log('stopped');
    stopping = true;
    return null;
  },
};

let stopping = false; // the stop op was answered: exit once the answer has left

process.on('message', async (msg) => {
  try {
    const handler = handlers[msg.op];
    if (!handler) throw new Error(`unknown op ${JSON.stringify(msg.op)}`);
    const result = await handler(msg);
    process.send({ id: msg.id, ok: true, result }, () => {
      if (stopping) process.exit(0);
    });
  } catch (err) {
    process.send({ id: msg.id, ok: false, error: err.message });
  }
});

// The parent is gone (or stop() let go): nothing is left to serve.
process.on('disconnect', () => {
  for (const link of links.values()) link.close();
  process.exit(0);
});
