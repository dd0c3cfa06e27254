// Clients for what the tests talk to besides the page: Redis (RESP over TCP), the admin HTTP API,
// and the agent's Unix socket (newline-delimited JSON).

import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';

// ---------------------------------------------------------------------------------------------
// A minimal RESP client: one command per connection, enough to inspect and plant keys.

export class RedisError extends Error {}

// Parses one RESP value from buf at offset: {value, next}, or null when buf is incomplete.
function parseResp(buf, offset = 0) {
  const eol = buf.indexOf('\r\n', offset);
  if (eol < 0) return null;
  const type = String.fromCharCode(buf[offset]);
  const line = buf.toString('utf8', offset + 1, eol);
  const next = eol + 2;
  switch (type) {
    case '+':
      return { value: line, next };
    case '-':
      return { value: new RedisError(line), next };
    case ':':
      return { value: Number(line), next };
    case '$': {
      const len = Number(line);
      if (len < 0) return { value: null, next };
      if (buf.length < next + len + 2) return null;
      return { value: buf.toString('utf8', next, next + len), next: next + len + 2 };
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return { value: null, next };
      const items = [];
      let at = next;
      for (let i = 0; i < count; i++) {
        const item = parseResp(buf, at);
        if (!item) return null;
        items.push(item.value);
        at = item.next;
      }
      return { value: items, next: at };
    }
    default:
      throw new RedisError(`unexpected RESP type byte ${JSON.stringify(type)}`);
  }
}

function encodeCommand(args) {
  const parts = [`*${args.length}\r\n`];
  for (const a of args) {
    const s = String(a);
    parts.push(`$${Buffer.byteLength(s)}\r\n${s}\r\n`);
  }
  return parts.join('');
}

// Runs one command on 127.0.0.1:port; a Redis error reply rejects with RedisError.
// tlsCa: a TLS-only master (--tls-port), its certificate checked against this CA (PEM text).
export function redisCommand(port, args, { timeoutMs = 10000, tlsCa = null } = {}) {
  return new Promise((resolve, reject) => {
    const sock = tlsCa ? tls.connect({ host: '127.0.0.1', port, ca: tlsCa })
      : net.connect({ host: '127.0.0.1', port });
    let buf = Buffer.alloc(0);
    const done = (err, value) => {
      sock.destroy();
      if (err) reject(err);
      else resolve(value);
    };
    sock.setTimeout(timeoutMs, () =>
      done(new Error(`redis 127.0.0.1:${port} ${args[0]}: no answer in ${timeoutMs} ms`)),
    );
    sock.on('error', (err) => done(err));
    sock.on(tlsCa ? 'secureConnect' : 'connect', () => sock.write(encodeCommand(args)));
    sock.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      let parsed;
      try {
        parsed = parseResp(buf);
      } catch (err) {
        done(err);
        return;
      }
      if (!parsed) return;
      if (parsed.value instanceof RedisError) done(parsed.value);
      else done(null, parsed.value);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// HTTP without keep-alive: an idle kept-alive connection (fetch() keeps one) holds up the
// agent's exit on SIGTERM by seconds.

export function httpRequest(url, { method = 'GET', headers = {}, body, timeoutMs = 15000 } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers, agent: false, timeout: timeoutMs }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.on('timeout', () => {
      req.destroy(new Error(`${method} ${url}: no answer in ${timeoutMs} ms`));
    });
    req.on('error', reject);
    req.end(body);
  });
}

// ---------------------------------------------------------------------------------------------
// Socket protocol client: newline-delimited JSON, replies matched by id, events collected.

export class LockClient {
  static connect(socketPath, { timeoutMs = 2000 } = {}) {
    return new Promise((resolve, reject) => {
      const sock = net.createConnection({ path: socketPath });
      const timer = setTimeout(() => {
        sock.destroy();
        reject(new Error(`connect ${socketPath}: timed out`));
      }, timeoutMs);
      sock.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      sock.once('connect', () => {
        clearTimeout(timer);
        resolve(new LockClient(sock));
      });
    });
  }

  constructor(sock) {
    this.sock = sock;
    this.nextId = 1;
    this.pending = new Map(); // id -> {resolve, reject, timer}
    this.events = []; // pushed lines with an "event" field, in arrival order
    this.eventWaiters = new Set();
    this.closed = false;
    let buf = '';
    sock.setEncoding('utf8');
    sock.on('data', (chunk) => {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.trim()) this.onLine(line);
      }
    });
    sock.on('error', () => {}); // surfaced through 'close'
    sock.on('close', () => {
      this.closed = true;
      for (const { reject, timer } of this.pending.values()) {
        clearTimeout(timer);
        reject(new Error('agent closed the connection'));
      }
      this.pending.clear();
    });
  }

  onLine(line) {
    const msg = JSON.parse(line);
    if ('event' in msg) {
      msg.receivedAt = Date.now();
      this.events.push(msg);
      for (const w of this.eventWaiters) w();
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    clearTimeout(p.timer);
    p.resolve(msg);
  }

  // Sends request (its id is set here) and resolves with the reply, which gets `receivedAt`
  // (Date.now() when the reply line arrived).
  call(request, { timeoutMs = 20000 } = {}) {
    if (this.closed) return Promise.reject(new Error('connection closed'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`no reply to ${JSON.stringify(request)} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (reply) => resolve(Object.assign(reply, { receivedAt: Date.now() })),
        reject,
        timer,
      });
      this.sock.write(`${JSON.stringify({ id, ...request })}\n`);
    });
  }

  async acquire(resource, fields = {}) {
    const reply = await this.call({ op: 'acquire', resource, ...fields });
    if (!reply.ok) throw new Error(`acquire ${resource}: ${JSON.stringify(reply)}`);
    return reply;
  }

  async release(resource, token) {
    const reply = await this.call({ op: 'release', resource, token });
    if (!reply.ok) throw new Error(`release ${resource}: ${JSON.stringify(reply)}`);
    return reply;
  }

  // Resolves with the first event (already received or yet to come) matching pred.
  waitForEvent(pred, { timeoutMs = 20000 } = {}) {
    const found = this.events.find(pred);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const check = () => {
        const ev = this.events.find(pred);
        if (!ev) return;
        clearTimeout(timer);
        this.eventWaiters.delete(check);
        resolve(ev);
      };
      const timer = setTimeout(() => {
        this.eventWaiters.delete(check);
        reject(
          new Error(`no matching event within ${timeoutMs} ms; got ${JSON.stringify(this.events)}`),
        );
      }, timeoutMs);
      this.eventWaiters.add(check);
    });
  }

  close() {
    this.sock.destroy();
  }
}
