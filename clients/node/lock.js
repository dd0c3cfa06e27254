'use strict';
// The lock objects a Client hands out (lockwarden.js): Lock, and Leadership, the Lock of a won
// campaign; the LockError of a failed request or a lost lock; and what the client's modules share:
// the monotonic clock, and emitEach, how the client emits an event to the app's listeners.

const { EventEmitter } = require('events');
const { performance } = require('perf_hooks');

// A monotonic clock, in ms.
const now = () => performance.now();

// Calls each listener of `event` on `emitter` in turn, as emit() does, except that one that
// throws does not stop the others, nor the client's reading of the lines after: its error is
// thrown again after this, on its own.
function emitEach(emitter, event, ...args) {
  for (const listener of emitter.rawListeners(event)) {
    try {
      listener.apply(emitter, args);
    } catch (err) {
      process.nextTick(() => { throw err; });
    }
  }
}

// An error reply of the agent. `code` is the machine code to branch on (timeout, no_quorum,
// not_held, too_many, forbidden, bad_request, kind_mismatch, shutting_down, internal), `detail`
// the agent's message, for people. The client adds `disconnected` (the connection ended) and
// `lost` (see Lock).
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
// disconnected, not_held, agent_lost); `signal` is an AbortSignal aborted at the same moment, its
// reason a LockError 'lost'. `mode` is 'exclusive' (a mutex's hold, or the write hold), 'shared'
// (a read hold) or 'permit' (a semaphore's); `permit` is which permit (0..K-1) for a semaphore's,
// else null; `fence` the fencing token if asked for (fence: true), else null. A detached lease
// (`detached` true) outlives the connection: no 'lost' comes for it, not even when the client
// closes.
//
// What a resume needs is kept from the acquire (`fields`: its ttl_ms, renew, permits) and from
// each extend (its ttl_ms); `_validUntil` is the monotonic time (now()) until which the lock is
// known valid: the client sets it (Client._dispatch, _pollHeld).
class Lock extends EventEmitter {
  constructor(client, reply, detached = false, fields = {}) {
    super();
    this.client = client;
    this.resource = reply.resource;
    this.token = reply.token;
    this.validityMs = reply.validity_ms;
    this.waitedMs = reply.waited_ms;
    this.fence = reply.fence === undefined ? null : reply.fence;
    this.mode = reply.mode || 'exclusive';
    this.permit = reply.permit === undefined ? null : reply.permit;
    // A reentrant hold's acquires not yet released (docs/protocol.md#owners-and-reentrancy).
    this.depth = reply.depth || 1;
    this.detached = detached;
    this.lost = null;
    this.released = false;
    this._abort = new AbortController();
    this.signal = this._abort.signal;
    this._ttlMs = fields.ttl_ms; // undefined: the agent's default
    this._renew = Boolean(fields.renew);
    this._permits = fields.permits;
    this._owner = fields.owner || 0;
    this._validUntil = now() + (reply.validity_ms || 0); // the client sets it from the request
    this._lostDetail = null;
  }

  // Resets the ttl to ttlMs from now (the agent's default ttl if omitted); resolves to the new
  // validity in ms.
  async extend(ttlMs) {
    this.check();
    this.validityMs = await this.client.extend(this.resource, this.token, ttlMs);
    return this.validityMs;
  }

  // Gives the lock back. No-op if it was already released or lost. (The client marks a lock of
  // its connection released as it reads the reply: see Client._dispatch.)
  async release() {
    if (this.released || this.lost) return;
    const left = await this._giveBack();
    if (left) return; // a reentrant hold, still `depth` acquires deep (set from the reply)
    this.released = true;
  }

  _giveBack() { return this.client.release(this.resource, this.token); }

  // Throws a LockError with code 'lost' if the lock was lost.
  check() {
    if (this.lost) throw this._lostError();
  }

  // Whether the client resumes it through the agent's next run once its connection ends.
  _resumable() { return !this.detached && !this.lost && !this.released; }

  // The fields of a resume of this lock (docs/protocol.md#resume).
  _resumeFields() {
    const fields = { resource: this.resource, token: this.token };
    if (this._ttlMs !== undefined) fields.ttl_ms = this._ttlMs;
    if (this._renew) fields.renew = true;
    if (this.fence !== null) fields.fence = this.fence;
    if (this.mode === 'permit') {
      fields.permits = this._permits;
      fields.permit = this.permit;
    }
    if (this.mode === 'shared') fields.shared = true;
    if (this._owner) fields.owner = this._owner;
    if (this.depth > 1) fields.depth = this.depth;
    return fields;
  }

  _lostError() {
    const why = this._lostDetail ? `${this.lost}: ${this._lostDetail}` : this.lost;
    return new LockError('lost', `lock on "${this.resource}" was lost (${why})`);
  }

  _markLost(reason, detail = null) {
    if (this.lost || this.released) return;
    this.lost = reason;
    this._lostDetail = detail;
    this.client._forget(this);
    this._abort.abort(this._lostError());
    emitEach(this, 'lost', reason);
  }
}

// A won campaign: this client leads `name` (also `resource`) with `term` (also `fence`: the term
// is the fence of the leadership's grant) while its connection lives, and through the agent's
// next run once resumed (as a lock is). Lost like a Lock ('lost' event, .lost, .signal): stop
// acting as the leader at once. release() and resign() resign; extend() works too.
class Leadership extends Lock {
  // fields: the campaign's (its ttl_ms). The agent renews every leadership.
  constructor(client, reply, fields = {}) {
    super(client, { ...reply, resource: reply.name, fence: reply.term }, false,
      { ttl_ms: fields.ttl_ms, renew: true });
    this.name = reply.name;
    this.term = reply.term;
  }

  resign() { return this.release(); }

  _giveBack() { return this.client.resign(this.name, this.token); }

  // Resumed like a lock, naming its term (docs/protocol.md#resume).
  _resumeFields() { return { ...super._resumeFields(), election: true }; }
}

// Several locks taken at once (Client.acquireAll), held together: `locks` in their canonical
// order (sorted), a Lock each. Emits 'lost' (reason) once one of them is lost, when `signal` is
// aborted too and the others are released; release() releases them all.
class LockSet extends EventEmitter {
  constructor(locks) {
    super();
    this.locks = locks;
    this.lost = null;
    this._abort = new AbortController();
    this.signal = this._abort.signal;
    for (const lock of locks) lock.once('lost', (reason) => this._memberLost(lock, reason));
  }

  // The lock of `resource`.
  get(resource) { return this.locks.find((l) => l.resource === resource); }

  _memberLost(lock, reason) {
    if (this.lost) return;
    this.lost = reason;
    this._abort.abort(lock._lostError());
    for (const other of this.locks) other.release().catch(() => {}); // lost too, or gone
    emitEach(this, 'lost', reason);
  }

  // Throws a LockError 'lost' if one of the locks was lost.
  check() {
    for (const lock of this.locks) lock.check();
  }

  // Releases every lock of the set; rejects with the first error after trying them all.
  async release() {
    const results = await Promise.allSettled(this.locks.map((l) => l.release()));
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  }
}

module.exports = { LockError, Lock, LockSet, Leadership, emitEach, now };
