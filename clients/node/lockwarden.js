'use strict';
// Client for the lockwarden agent's Unix socket (docs/protocol.md). Node.js 18+, builtins only.
//
//   const { Client } = require('./lockwarden');
//   const client = await Client.connect();
//   await client.withLock('db/migrations', { ttlMs: 30000, waitMs: 5000, renew: true },
//     async (lock) => { await migrate({ signal: lock.signal }); });
//   client.close();
//
// One Client is one connection, that is one agent session: its locks are released when it
// closes. Every line the agent sends is read as it arrives: replies settle the request with the
// same id, and a pushed `lost` event marks its Lock lost ('lost' event, .lost, .signal aborted).

const net = require('net');
const { EventEmitter } = require('events');

const DEFAULT_SOCKET = '/run/lockwarden/lockwarden.sock';

function defaultSocket() {
  return process.env.LOCKWARDEN_SOCKET || DEFAULT_SOCKET;
}

// An error reply of the agent. `code` is the machine code to branch on (timeout, no_quorum,
// not_held, too_many, forbidden, bad_request, kind_mismatch, shutting_down, internal), `message`
// is for people.
// The client adds `disconnected` (the connection ended) and `lost` (see Lock).
class LockError extends Error {
  constructor(code, message) {
    super(`${code}: ${message}`);
    this.name = 'LockError';
    this.code = code;
    this.detail = message;
  }
}

// A granted lock. Emits 'lost' (reason) when it ends without being released: stop the work it
// protected. `lost` is null while held, else the reason (renew_failed, expired, revoked,
// disconnected); `signal` is an AbortSignal aborted at the same moment. `mode` is 'exclusive'
// (a mutex's hold, or the write hold), 'shared' (a read hold) or 'permit' (a semaphore's);
// `permit` is which permit (0..K-1) for a semaphore's, else null.
class Lock extends EventEmitter {
  constructor(client, reply) {
    super();
    this.client = client;
    this.resource = reply.resource;
    this.token = reply.token;
    this.validityMs = reply.validity_ms;
    this.waitedMs = reply.waited_ms;
    this.fence = reply.fence;
    this.mode = reply.mode || 'exclusive';
    this.permit = reply.permit === undefined ? null : reply.permit;
    this.lost = null;
    this.released = false;
    this._abort = new AbortController();
    this.signal = this._abort.signal;
  }

  // Resets the ttl to ttlMs from now (the agent's default ttl if omitted); resolves to the new
  // validity in ms.
  async extend(ttlMs) {
    this.check();
    const fields = { resource: this.resource, token: this.token };
    if (ttlMs !== undefined) fields.ttl_ms = ttlMs;
    const reply = await this.client.request('extend', fields);
    this.validityMs = reply.validity_ms;
    return this.validityMs;
  }

  // Gives the lock back. No-op if it was already released or lost.
  async release() {
    if (this.released || this.lost) return;
    await this.client.request('release', { resource: this.resource, token: this.token });
    this.released = true;
    this.client._locks.delete(this.token);
  }

  // Throws a LockError with code 'lost' if the lock was lost.
  check() {
    if (this.lost) throw new LockError('lost', `lock on "${this.resource}" was lost (${this.lost})`);
  }

  _markLost(reason) {
    if (this.lost || this.released) return;
    this.lost = reason;
    this._abort.abort(new LockError('lost', `lock on "${this.resource}" was lost (${reason})`));
    this.emit('lost', reason);
  }
}

// One connection (session) to the agent. Emits 'close' (reason) when the connection ends.
class Client extends EventEmitter {
  // Resolves to a connected Client; path defaults to $LOCKWARDEN_SOCKET, then the default.
  static connect(path = defaultSocket()) {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection(path);
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.off('error', reject);
        resolve(new Client(socket));
      });
    });
  }

  constructor(socket) {
    super();
    this._socket = socket;
    this._nextId = 1;
    this._pending = new Map(); // id -> { op, resolve, reject }
    this._locks = new Map(); // token -> Lock
    this._closed = null; // reason once the connection is gone
    this._buffer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => this._onData(chunk));
    socket.on('error', (err) => { this._closed = this._closed || err.message; });
    socket.on('close', () => this._onClose());
  }

  // Sends one request; resolves to its reply, or rejects with a LockError when ok is false.
  request(op, fields = {}) {
    if (this._closed) return Promise.reject(new LockError('disconnected', this._closed));
    const id = this._nextId++;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { op, resolve, reject });
      this._socket.write(JSON.stringify({ id, op, ...fields }) + '\n');
    });
  }

  // Takes the lock, waiting up to waitMs for another holder. With renew: true the agent extends
  // it every ttl/3 while this connection is open. permits: K takes one permit of a semaphore of
  // K (at most K holders at once); shared: true a read hold (readers share, an exclusive hold
  // excludes them); neither, the exclusive hold. Resolves to a Lock; rejects with a LockError
  // (code 'timeout': held by someone else for all of waitMs; 'no_quorum': masters unavailable;
  // 'kind_mismatch': the resource is in use as another kind or another K).
  async acquire(resource, {
    ttlMs, waitMs = 0, renew = false, fence = false, permits, shared = false,
  } = {}) {
    const fields = { resource, wait_ms: waitMs };
    if (ttlMs !== undefined) fields.ttl_ms = ttlMs;
    if (renew) fields.renew = true;
    if (fence) fields.fence = true;
    if (permits !== undefined) fields.permits = permits;
    if (shared) fields.shared = true;
    return (await this.request('acquire', fields)).lock;
  }

  // Acquires, runs fn(lock), releases. Rejects with a 'lost' LockError if the lock was lost
  // while fn ran (fn should pass lock.signal to what it awaits, or watch it, and stop early).
  async withLock(resource, options, fn) {
    const lock = await this.acquire(resource, options);
    let result;
    try {
      result = await fn(lock);
    } catch (err) {
      await lock.release().catch(() => {}); // the error of fn is the one to report
      if (err && err.name === 'AbortError') lock.check(); // aborted by lock.signal: say why
      throw err;
    }
    try {
      await lock.release();
    } catch (err) {
      // not_held: lost, its event still on the way; disconnected: the agent released it.
      if (err.code !== 'not_held' && err.code !== 'disconnected') throw err;
      lock._markLost(err.code);
    }
    lock.check(); // lost before the end of fn: the work did not finish under the lock
    return result;
  }

  ping() { return this.request('ping'); }
  async held() { return (await this.request('held')).locks; }
  health() { return this.request('health'); }

  // Closes the connection; the agent releases every lock this client still holds.
  close() {
    this._socket.end();
    return new Promise((resolve) => {
      if (this._socket.destroyed) resolve();
      else this._socket.once('close', resolve);
    });
  }

  _onData(chunk) {
    this._buffer += chunk;
    let nl;
    while ((nl = this._buffer.indexOf('\n')) >= 0) {
      const line = this._buffer.slice(0, nl);
      this._buffer = this._buffer.slice(nl + 1);
      if (line.trim()) this._dispatch(JSON.parse(line));
    }
  }

  _dispatch(msg) {
    if (msg.event !== undefined) {
      const lock = msg.event === 'lost' && this._locks.get(msg.token);
      if (lock) {
        this._locks.delete(msg.token);
        lock._markLost(msg.reason || 'lost');
      }
      return;
    }
    const pending = this._pending.get(msg.id);
    if (!pending) {
      if (msg.ok === false) this._closed = `${msg.error}: ${msg.message}`; // e.g. too_many
      return;
    }
    this._pending.delete(msg.id);
    if (!msg.ok) {
      pending.reject(new LockError(msg.error || 'internal', msg.message || ''));
      return;
    }
    if (pending.op === 'acquire') {
      // Registered before any later line is read, so a `lost` right behind it finds its lock.
      msg.lock = new Lock(this, msg);
      this._locks.set(msg.token, msg.lock);
    }
    pending.resolve(msg);
  }

  _onClose() {
    const reason = this._closed || 'connection closed by the agent';
    this._closed = reason;
    for (const p of this._pending.values()) p.reject(new LockError('disconnected', reason));
    this._pending.clear();
    for (const lock of this._locks.values()) lock._markLost('disconnected');
    this._locks.clear();
    this.emit('close', reason);
  }
}

module.exports = { Client, Lock, LockError, defaultSocket, DEFAULT_SOCKET };
