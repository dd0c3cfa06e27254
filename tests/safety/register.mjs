// The fenced register: the storage a lock protects, served by the checker process on a Unix
// socket (newline-delimited JSON). Per resource it keeps the highest fence it has seen, on a read
// or an accepted write, and a counter. A write is accepted iff its fence >= highest (then
// highest = fence), so a holder whose lock expired under it cannot overwrite the work of a later
// holder with a higher fence, even one that has only read so far: otherwise the stale holder's
// write lands between the new holder's read and write, and the new holder's write, built on the
// value it read, loses it (a lost update that no fence check on writes alone can catch).
//
// Client → register (one JSON object per line; ops with an id get a reply with that id):
//   {"op":"hello","client":"c1","pid":123,"agent":"a0"}
//   {"id":1,"op":"read","client":"c1","resource":"r0","fence":7,"token":"..."}
//        → {"id":1,"ok":true,"value":41,"highest":6}
//   {"id":2,"op":"write","client":"c1","resource":"r0","fence":7,"value":42,"token":"..."}
//        → {"id":2,"ok":true,"accepted":true,"highest":7}
//   {"id":3,"op":"holding","client":"sem0","resource":"s0","token":"...","validity_end_us":...}
//        → {"id":3,"ok":true}   a hold client holds, or a candidate leads (where an armed
//                                pause can stop it)
//   {"op":"record", ...}   a finished grant or hold, a leader's term or an observer's answer
//                          (candidate.mjs), or a failed acquire or campaign ({error, resource,
//                          t_requested, t}; a failed connect: {error: "connect", t}), no reply
// Register → client: {"event":"stop"} (finish the current cycle, then exit).
//
// Every op is logged with the register's monotonic clock (µs, CLOCK_MONOTONIC, the same clock
// the clients read with process.hrtime.bigint()).

import fs from 'node:fs';
import net from 'node:net';
import readline from 'node:readline';

export const nowUs = () => Number(process.hrtime.bigint() / 1000n);

export class FencedRegister {
  constructor(socketPath) {
    this.socketPath = socketPath;
    this.resources = new Map(); // resource -> {highest, value, accepted}
    this.ops = []; // {t, client, op, resource, fence, token, value, accepted}
    this.grants = []; // records of finished grants, as the register clients sent them
    this.holds = []; // records of finished semaphore and read-write holds, as the clients sent them
    this.leaders = []; // records of finished terms, as the candidates sent them
    this.observed = []; // the observers' answers: observe replies, leader events, leader reads
    this.failures = new Map(); // acquire error code -> count
    this.failed = []; // the failed acquires' records, as the clients sent them
    this.clients = new Map(); // name -> {pid, agent, conn}
    this.armed = new Set(); // the armed client pauses, see pauseNextRead
    this.onGrant = null; // called with each grant record as it arrives
    this.connections = new Set();
  }

  async start() {
    fs.rmSync(this.socketPath, { force: true });
    this.server = net.createServer((conn) => this.serve(conn));
    await new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.socketPath, resolve);
    });
  }

  async close() {
    for (const conn of this.connections) conn.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }

  state(resource) {
    let s = this.resources.get(resource);
    if (!s) {
      s = { highest: null, value: 0, accepted: 0 };
      this.resources.set(resource, s);
    }
    return s;
  }

  serve(conn) {
    this.connections.add(conn);
    readline.createInterface({ input: conn, crlfDelay: Infinity }).on('line', (line) => {
      if (line.trim()) this.handle(conn, JSON.parse(line));
    });
    conn.on('error', () => {});
    conn.on('close', () => this.connections.delete(conn));
  }

  handle(conn, msg) {
    const reply = (fields) => conn.write(`${JSON.stringify({ id: msg.id, ok: true, ...fields })}\n`);
    const t = nowUs();
    switch (msg.op) {
      case 'hello':
        this.clients.set(msg.client, { pid: msg.pid, agent: msg.agent, conn });
        return;
      case 'record':
        if (msg.type === 'grant') {
          this.grants.push(msg);
          if (this.onGrant) this.onGrant(msg);
        } else if (msg.type === 'hold') {
          this.holds.push(msg);
        } else if (msg.type === 'leader') {
          this.leaders.push(msg);
        } else if (msg.type === 'observed') {
          this.observed.push(msg);
        } else if (msg.type === 'failure') {
          this.failures.set(msg.error, (this.failures.get(msg.error) || 0) + 1);
          this.failed.push(msg);
        }
        return;
      case 'read': {
        const s = this.state(msg.resource);
        if (Number.isInteger(msg.fence) && (s.highest === null || msg.fence > s.highest)) {
          s.highest = msg.fence;
        }
        this.ops.push({ t, op: 'read', client: msg.client, resource: msg.resource,
          fence: msg.fence, token: msg.token, value: s.value });
        this.stopIfArmed(msg, t);
        reply({ value: s.value, highest: s.highest });
        return;
      }
      case 'holding':
        this.stopIfArmed(msg, t);
        reply({});
        return;
      case 'write': {
        const s = this.state(msg.resource);
        const accepted = s.highest === null || msg.fence >= s.highest;
        if (accepted) {
          s.highest = msg.fence;
          s.value = msg.value;
          s.accepted++;
        }
        this.ops.push({ t, op: 'write', client: msg.client, resource: msg.resource,
          fence: msg.fence, token: msg.token, value: msg.value, accepted });
        reply({ accepted, highest: s.highest });
        return;
      }
      default:
        conn.write(`${JSON.stringify({ id: msg.id, ok: false, error: `unknown op ${msg.op}` })}\n`);
    }
  }

  // The first armed pause that wants this read or holding message stops its client before the
  // reply is sent: the pause lands inside the client's hold, whatever the scheduler does. The
  // reply waits in the socket buffer.
  stopIfArmed(msg, t) {
    const armed = [...this.armed].find((a) => a.wants(msg));
    if (!armed) return;
    const { pid } = this.clients.get(msg.client);
    process.kill(pid, 'SIGSTOP');
    this.armed.delete(armed);
    armed.resolve({ client: msg.client, pid, t, resource: msg.resource, fence: msg.fence,
      token: msg.token, validityEndUs: msg.validity_end_us });
  }

  // Arms a client pause (several may be armed at once): the next read or holding message from a
  // client accepted by pick(name) SIGSTOPs that client before the reply is sent. Resolves with
  // {client, pid, t, resource, fence, token, validityEndUs} once a client is stopped; rejects
  // after timeoutMs without one.
  pauseNextRead(pick = () => true, timeoutMs = 10000) {
    return new Promise((resolve, reject) => {
      const armed = {
        wants: (msg) => pick(msg.client),
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
      };
      const timer = setTimeout(() => {
        this.armed.delete(armed);
        reject(new Error(`no client read within ${timeoutMs} ms to pause`));
      }, timeoutMs);
      this.armed.add(armed);
    });
  }

  // Whether a register client is inside a hold right now: its last op is a read (it holds a
  // grant, between its read and its write).
  isHolding(client) {
    for (let i = this.ops.length - 1; i >= 0; i--) {
      if (this.ops[i].client === client) return this.ops[i].op === 'read';
    }
    return false;
  }

  // Tells every client to finish its current cycle and exit.
  broadcastStop() {
    for (const { conn } of this.clients.values()) conn.write('{"event":"stop"}\n');
  }

  // The hold or leader record with that token, once it arrived (null until then).
  holdOf(token) {
    for (const list of [this.holds, this.leaders]) {
      for (let i = list.length - 1; i >= 0; i--) if (list[i].token === token) return list[i];
    }
    return null;
  }

  // The write the client sent with that token, once it arrived (null until then).
  writeOf(token) {
    for (let i = this.ops.length - 1; i >= 0; i--) {
      const op = this.ops[i];
      if (op.op === 'write' && op.token === token) return op;
    }
    return null;
  }
}
