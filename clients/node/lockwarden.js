'use strict';
// Client for the lockwarden agent's Unix socket (docs/protocol.md). Node.js 18+, builtins only.
// Its types are lockwarden.d.ts; README.md describes the API. Lock, Leadership and LockError
// are in lock.js, the resuming of the locks across the agent's restarts (below) in resume.js.
//
//   const { Client } = require('lockwarden');
//   const client = await Client.connect();
//   await client.withLock('db/migrations', { ttlMs: 30000, waitMs: 5000, renew: true },
//     async (lock) => { await migrate({ signal: lock.signal }); });
//   await client.close();
//
// One Client is one connection, that is one agent session: its locks are released when it
// closes. Every line the agent sends is read as it arrives: replies settle the request with the
// same id, and a pushed `lost` event marks its Lock lost ('lost' event, .lost, .signal aborted).
//
// When the connection ends without close() (the agent stopped, died or restarts) while the client
// holds locks, the client reconnects to the same socket and resumes them through the agent's next
// run (docs/protocol.md#resume): 'resuming', then 'resumed' once each is held again or lost
// ('agent_lost'). It knows until when each lock is valid (from the grant, each extend, and for a
// renewed lock a `held` read every third of the smallest renewed ttl) and reports a lock lost
// once that passes before its resume succeeded.
//
// Elections (docs/elections.md): campaign() resolves to a Leadership (a Lock whose release
// resigns), lost like a lock; leader() says who leads; observe() resolves to an Observation that
// emits the pushed `leader` events and is an async iterator of them. Detached leases (acquire
// with detach: true) outlive the connection: client.release(resource, token) /
// client.extend(...) from any connection.
//
// acquire(), campaign() and request() take an AbortSignal: aborting it rejects the request with
// signal.reason at once, and what its reply still grants (a lock, a leadership, an observation)
// is given back by the client, since nobody holds it.
//
// A line from the agent that is not a JSON object ends the client for good (requests reject
// 'disconnected', locks are lost 'disconnected', nothing is resumed). A listener that throws
// keeps neither the other listeners nor the client from going on; its error is thrown again on
// its own (an uncaughtException, as from any listener).

const net = require('net');
const { EventEmitter } = require('events');
const { LockError, Lock, LockSet, Leadership, emitEach, now } = require('./lock');
const { mixInto: mixInResuming, RECONNECT_FIRST_MS } = require('./resume');

const DEFAULT_SOCKET = '/run/lockwarden/lockwarden.sock';
const OBSERVATION_BUFFER = 16; // events an async iterator keeps for a slow reader

function defaultSocket() {
  return process.env.LOCKWARDEN_SOCKET || DEFAULT_SOCKET;
}

// The message on a line from the agent, or null if the line is not a JSON object.
function parseLine(line) {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return null;
  }
  return msg !== null && typeof msg === 'object' && !Array.isArray(msg) ? msg : null;
}

// Follows who leads an election (Client.observe). `leader` is the latest leader ({ value, agent,
// host, pid, since, term }) or null, `term` the latest term known (null until one is). Emits
// 'leader' (event) for every pushed change ({ event, name, leader, term, missed }; missed:
// changes before this one may have gone unseen), after updating them: check `term` before
// waiting for an event, one may have come already. Emits 'end' (reason) once ended: 'unobserved'
// (unobserve()), 'observed_again' (observe() of the name again: a new Observation follows it)
// or 'disconnected'; `ended` is then that reason.
//
// Also an async iterator of the events pushed from the moment it is made (for await ... of):
// it keeps the last OBSERVATION_BUFFER for a slow reader (an older one is dropped, and the next
// one read says missed: true), finishes when the observation ends, or throws a LockError
// 'disconnected' if the connection ended.
class Observation extends EventEmitter {
  constructor(client, reply) {
    super();
    this.client = client;
    this.name = reply.name;
    this.leader = reply.leader;
    this.term = reply.leader ? reply.leader.term : null;
    this.ended = null;
  }

  // Stops this observation; once it has ended (e.g. observed again), a no-op that leaves the
  // name's current observation alone.
  unobserve() { return this.ended ? Promise.resolve() : this.client.unobserve(this.name); }

  [Symbol.asyncIterator]() {
    const queue = [];
    let waiter = null; // the pending next() while the queue is empty
    let finished = false;
    const endResult = () => {
      if (this.ended === 'disconnected') {
        return Promise.reject(new LockError('disconnected', `observation of "${this.name}" ended`));
      }
      return Promise.resolve({ value: undefined, done: true });
    };
    const onLeader = (event) => {
      if (waiter) {
        const { resolve } = waiter;
        waiter = null;
        resolve({ value: event, done: false });
        return;
      }
      queue.push(event);
      if (queue.length > OBSERVATION_BUFFER) {
        queue.shift();
        queue[0] = { ...queue[0], missed: true };
      }
    };
    const stop = () => {
      finished = true;
      this.off('leader', onLeader);
      this.off('end', onEnd);
    };
    const onEnd = () => {
      this.off('leader', onLeader);
      this.off('end', onEnd);
      if (waiter) {
        const { resolve } = waiter;
        waiter = null;
        resolve(endResult());
      }
    };
    if (this.ended) finished = true;
    else {
      this.on('leader', onLeader);
      this.on('end', onEnd);
    }
    return {
      next: () => {
        if (queue.length) return Promise.resolve({ value: queue.shift(), done: false });
        if (finished || this.ended) {
          finished = true;
          return endResult();
        }
        return new Promise((resolve) => { waiter = { resolve }; });
      },
      // Leaving a for-await loop stops this iterator (the observation goes on: unobserve()).
      return: () => {
        stop();
        queue.length = 0;
        if (waiter) {
          waiter.resolve({ value: undefined, done: true });
          waiter = null;
        }
        return Promise.resolve({ value: undefined, done: true });
      },
      [Symbol.asyncIterator]() { return this; },
    };
  }

  _push(event) {
    this.leader = event.leader;
    this.term = event.term;
    emitEach(this, 'leader', event);
  }

  _end(reason) {
    if (this.ended) return;
    this.ended = reason;
    emitEach(this, 'end', reason);
  }
}

// One connection (session) to the agent, resumed through the agent's next run when it ends
// under the client's locks (see the top of this file). Emits 'close' (reason) once the client is
// done: its connection ended with nothing to resume, or its resuming ended without a connection
// (every lock lost, or close()). Emits 'resuming' (reason) when the connection ended under locks
// it resumes, then 'resumed' once connected again with each of them held again or lost.
class Client extends EventEmitter {
  // Resolves to a connected Client; path defaults to $LOCKWARDEN_SOCKET, then the default.
  // Rejects with the socket's error (its code, e.g. ENOENT, kept; the socket it was in `cause`)
  // whose message names the socket: `cannot connect to the lockwarden agent at PATH: ...`.
  static connect(path = defaultSocket()) {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection(path);
      const unreachable = (err) => {
        const why = err.message.replace(` ${path}`, ''); // "connect ENOENT", without the path again
        const error = new Error(`cannot connect to the lockwarden agent at ${path}: ${why}`,
          { cause: err });
        error.code = err.code;
        error.path = path;
        reject(error);
      };
      socket.once('error', unreachable);
      socket.once('connect', () => {
        socket.off('error', unreachable);
        resolve(new Client(socket, { path }));
      });
    });
  }

  // `path`: the socket to reconnect to, to resume the locks when the connection ends; without
  // it, they are lost ('disconnected') then, as the connection's end loses them.
  constructor(socket, { path } = {}) {
    super();
    this._path = path;
    this._socket = null; // the connection, null while there is none
    this._nextId = 1;
    this._pending = new Map(); // id -> { op, fields, sent, resolve, reject, abandoned }
    this._locks = new Map(); // token -> Lock held on this connection
    this._nextOwner = 1; // the owner of an acquire that names none (each its own)
    this._toResume = new Map(); // token -> Lock held through an earlier connection, to resume
    this._observations = new Map(); // election name -> Observation
    this._closed = null; // reason while there is no connection
    this._ended = false; // once done ('close' emitted)
    this._userClosed = false; // close() was called
    this._noResume = false; // the agent sent a line that is not a JSON object
    this._buffer = '';
    this._closeWaiters = []; // close()'s, resolved once done
    // Resuming: between 'resuming' and 'resumed' (or the end).
    this._resuming = false;
    this._backoff = RECONNECT_FIRST_MS;
    this._retryTimer = null; // the next reconnection or resume round
    this._expiryTimer = null; // the earliest validity of a lock to resume
    this._connecting = null; // the socket of a reconnection not yet connected
    this._round = false; // resumes in flight
    this._heldTimer = null; // the next `held` read of the renewed locks' validity
    this._heldDue = 0;
    this._attach(socket);
  }

  // Sends one request; resolves to its reply, or rejects with a LockError when ok is false.
  // With `signal`, rejects with signal.reason once it aborts (nothing is sent if it already
  // has); the reply that still comes is then handled as abandoned (see _dispatch).
  request(op, fields = {}, { signal } = {}) {
    if (signal && signal.aborted) return Promise.reject(signal.reason);
    if (this._closed) return Promise.reject(new LockError('disconnected', this._closed));
    const id = this._nextId++;
    return new Promise((resolve, reject) => {
      const pending = { op, fields, sent: now(), resolve, reject, abandoned: false };
      if (signal) {
        const onAbort = () => {
          if (this._pending.get(id) !== pending) return;
          pending.abandoned = true;
          reject(signal.reason);
        };
        signal.addEventListener('abort', onAbort, { once: true });
        const settle = (fn) => (value) => {
          signal.removeEventListener('abort', onAbort);
          fn(value);
        };
        pending.resolve = settle(resolve);
        pending.reject = settle(reject);
      }
      this._pending.set(id, pending);
      this._socket.write(JSON.stringify({ id, op, ...fields }) + '\n');
    });
  }

  // Takes the lock, waiting up to waitMs for another holder. With renew: true the agent extends
  // it every ttl/3 while this connection is open. permits: K takes one permit of a semaphore of
  // K (at most K holders at once); shared: true a read hold (readers share, an exclusive hold
  // excludes them); neither, the exclusive hold. detach: true takes a detached lease: it outlives
  // this connection until its ttl runs out or release(resource, token) from any connection of
  // this uid (not with renew). signal: stops waiting when aborted (rejects with its reason; a
  // grant that still comes is released). Resolves to a Lock; rejects with a LockError
  // (code 'timeout': held by someone else for all of waitMs; 'no_quorum': masters unavailable;
  // 'kind_mismatch': the resource is in use as another kind or another K; 'would_deadlock': this
  // owner holds it already, so it could only wait for itself). owner: who in the program asks
  // (an integer below 2^53, e.g. a request's or a job's id); by default each acquire is an owner
  // of its own, since the client cannot tell its callers apart. reentrant: true (with an owner):
  // a mutex or write hold this owner holds already is taken again: the same Lock, `depth` one
  // more, let go of by as many releases (docs/protocol.md#owners-and-reentrancy).
  async acquire(resource, {
    ttlMs, waitMs = 0, renew = false, fence = false, permits, shared = false, detach = false,
    owner, reentrant = false, signal,
  } = {}) {
    const fields = { resource, wait_ms: waitMs, owner: owner ?? this._nextOwner++ };
    if (reentrant) fields.reentrant = true;
    if (ttlMs !== undefined) fields.ttl_ms = ttlMs;
    if (renew) fields.renew = true;
    if (fence) fields.fence = true;
    if (permits !== undefined) fields.permits = permits;
    if (shared) fields.shared = true;
    if (detach) fields.detach = true;
    return (await this.request('acquire', fields, { signal })).lock;
  }

  // Takes every one of `resources` (2 to 16, distinct), all or none, within one waitMs: the
  // agent takes them in one canonical order, so two such acquires never wait for each other in
  // a cycle. Options as acquire's (not detach, reentrant). Resolves to a LockSet (a Lock each,
  // held together: lost when one is lost); rejects as acquire does, naming the resource that
  // could not be taken (none is held then).
  async acquireAll(resources, {
    ttlMs, waitMs = 0, renew = false, fence = false, permits, shared = false, owner, signal,
  } = {}) {
    const fields = { resources, wait_ms: waitMs, owner: owner ?? this._nextOwner++ };
    if (ttlMs !== undefined) fields.ttl_ms = ttlMs;
    if (renew) fields.renew = true;
    if (fence) fields.fence = true;
    if (permits !== undefined) fields.permits = permits;
    if (shared) fields.shared = true;
    return new LockSet((await this.request('acquire', fields, { signal })).locks);
  }

  // Releases the hold of `token` on `resource`: this connection's, or a detached lease from any
  // connection (rejects not_held: no such hold; forbidden: another uid's lease). A lock still to
  // be resumed is given up instead: not resumed, it stays on the masters until its ttl runs out.
  async release(resource, token) {
    const lock = this._toResume.get(token);
    if (lock && lock.resource === resource && lock.depth > 1) return --lock.depth;
    if (lock && lock.resource === resource) {
      this._toResume.delete(token);
      lock.released = true;
      this._advance();
      return;
    }
    return (await this.request('release', { resource, token })).depth || 0;
  }

  // Resets the ttl of the hold of `token` (as release) to ttlMs; resolves to the new validity.
  // Rejects 'disconnected' for a lock still to be resumed.
  async extend(resource, token, ttlMs) {
    if (this._toResume.has(token)) {
      throw new LockError('disconnected', `the lock on "${resource}" is being resumed`);
    }
    const fields = { resource, token };
    if (ttlMs !== undefined) fields.ttl_ms = ttlMs;
    return (await this.request('extend', fields)).validity_ms;
  }

  // Waits up to waitMs (default: the agent's max_wait_ms) to lead election `name`, announcing
  // `value` (e.g. host:port). Resolves to a Leadership (term, token, validityMs, waitedMs) that
  // lasts while this connection lives; rejects with a LockError ('timeout': another led for all
  // of waitMs; 'no_quorum', 'kind_mismatch', 'forbidden'...). signal: stops waiting when aborted
  // (rejects with its reason; a leadership that still comes is resigned).
  async campaign(name, value, { ttlMs, waitMs, signal } = {}) {
    const fields = { name, value };
    if (ttlMs !== undefined) fields.ttl_ms = ttlMs;
    if (waitMs !== undefined) fields.wait_ms = waitMs;
    return (await this.request('campaign', fields, { signal })).lock;
  }

  // Stops leading `name` (rejects not_held: `token` does not lead it on this connection now).
  async resign(name, token) {
    await this.request('resign', { name, token });
  }

  // Who leads `name` now: { value, agent, host, pid, since, term } or null.
  async leader(name) { return (await this.request('leader', { name })).leader; }

  // Follows election `name`: resolves to an Observation holding the current leader, then
  // emitting every change. Observing a name again starts it over (a new Observation).
  async observe(name) { return (await this.request('observe', { name })).observation; }

  // Stops the events of `name` (rejects not_held: not observed). Its Observation ends
  // ('unobserved') as the reply is read (see _dispatch).
  async unobserve(name) {
    await this.request('unobserve', { name });
  }

  // Acquires, runs fn(lock), releases (options may be left out). Rejects with a 'lost' LockError
  // if the lock was lost while fn ran (fn should pass lock.signal to what it awaits, or watch
  // it, and stop early).
  async withLock(resource, options, fn) {
    if (typeof options === 'function') [options, fn] = [{}, options];
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

  // Closes the connection (the agent releases every lock this client still holds) and stops
  // resuming (the locks still to be resumed are lost, 'disconnected'). Resolves once done.
  close() {
    this._userClosed = true;
    if (this._ended) return Promise.resolve();
    const done = new Promise((resolve) => this._closeWaiters.push(resolve));
    const socket = this._socket;
    if (socket) {
      // What was written goes out, then the socket is closed outright: only shut down for
      // writing, it would have the agent answer every request in flight first, waits included
      // (docs/protocol.md, end of input), and keep the locks until then.
      this._closed = this._closed || 'the client was closed';
      socket.end(() => socket.destroy());
    } else {
      this._finish(this._closed);
    }
    return done;
  }

  // Makes `socket` the connection.
  _attach(socket) {
    this._socket = socket;
    this._closed = null;
    this._buffer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => { if (socket === this._socket) this._onData(chunk); });
    socket.on('error', (err) => {
      if (socket === this._socket) this._closed = this._closed || err.message;
    });
    socket.on('close', () => this._onClose(socket));
  }

  _onData(chunk) {
    this._buffer += chunk;
    let nl;
    while (this._socket && (nl = this._buffer.indexOf('\n')) >= 0) {
      const line = this._buffer.slice(0, nl);
      this._buffer = this._buffer.slice(nl + 1);
      if (!line.trim()) continue;
      const msg = parseLine(line);
      if (msg === null) {
        // What follows cannot be trusted either: the lines after it are not read, and the
        // locks are not resumed through such an agent.
        this._fail(`the agent sent a line that is not a JSON object: ${line.slice(0, 200)}`);
        return;
      }
      this._dispatch(msg);
    }
  }

  // Ends the connection from this side, at once, for good (nothing is resumed).
  _fail(reason) {
    const socket = this._socket;
    this._closed = this._closed || reason;
    this._noResume = true;
    socket.destroy();
    this._onClose(socket);
  }

  _dispatch(msg) {
    if (msg.event !== undefined) {
      const lock = msg.event === 'lost' && this._locks.get(msg.token);
      if (lock) {
        this._locks.delete(msg.token);
        lock._markLost(msg.reason);
      }
      const observation = msg.event === 'leader' && this._observations.get(msg.name);
      if (observation) observation._push(msg);
      return;
    }
    const pending = this._pending.get(msg.id);
    if (!pending) {
      if (msg.ok === false) this._closed = `${msg.error}: ${msg.message}`; // e.g. too_many
      return;
    }
    this._pending.delete(msg.id);
    // What the agent ended or granted is recorded here, in reply order (a later microtask would
    // see the replies and events read after this one first), and also for an abandoned request.
    if (msg.ok) this._recordEnd(pending, msg);
    if (pending.abandoned) {
      if (msg.ok) this._giveBack(pending, msg);
      return;
    }
    if (!msg.ok) {
      pending.reject(new LockError(msg.error || 'internal', msg.message || ''));
      return;
    }
    // Registered before any later line is read, so an event right behind the reply (`lost`,
    // `leader`) finds what it is for.
    const again = this._locks.get(msg.token);
    if (pending.op === 'acquire' && msg.resources) {
      // Several resources: a Lock each, held on this connection like any other.
      msg.locks = msg.resources.map((entry) => {
        const lock = new Lock(this, entry, false, pending.fields);
        lock._validUntil = pending.sent + entry.validity_ms;
        this._locks.set(entry.token, lock);
        return lock;
      });
      this._scheduleHeld();
    } else if (pending.op === 'acquire' && again && pending.fields.reentrant) {
      // A reentrant hold taken again: the same Lock, one more acquire deep.
      again.depth = msg.depth;
      again.validityMs = msg.validity_ms;
      again._validUntil = pending.sent + msg.validity_ms;
      msg.lock = again;
    } else if (pending.op === 'acquire') {
      msg.lock = new Lock(this, msg, Boolean(pending.fields.detach), pending.fields);
      msg.lock._validUntil = pending.sent + msg.validity_ms;
      // No `lost` comes for a detached lease, and the connection's end does not end it.
      if (!msg.lock.detached) {
        this._locks.set(msg.token, msg.lock);
        this._scheduleHeld();
      }
    } else if (pending.op === 'campaign') {
      msg.lock = new Leadership(this, msg, pending.fields);
      msg.lock._validUntil = pending.sent + msg.validity_ms;
      this._locks.set(msg.token, msg.lock);
      this._scheduleHeld();
    } else if (pending.op === 'observe') {
      msg.observation = new Observation(this, msg);
      const replaced = this._observations.get(msg.name);
      this._observations.set(msg.name, msg.observation);
      if (replaced) replaced._end('observed_again');
    }
    pending.resolve(msg);
  }

  // A release or resign that succeeded: its lock is released (no `lost` comes for it, nor does
  // the connection's end lose it). An extend: its lock's validity and ttl. A resume: its lock is
  // held on this connection again. An unobserve: its Observation ends.
  _recordEnd(pending, msg) {
    const { op, fields } = pending;
    if (op === 'release' || op === 'resign') {
      const lock = this._locks.get(fields.token);
      if (lock && msg.depth) {
        lock.depth = msg.depth; // a reentrant hold, still held that many acquires deep
      } else if (lock) {
        this._locks.delete(fields.token);
        lock.released = true;
      }
    } else if (op === 'extend') {
      const lock = this._locks.get(fields.token);
      if (lock) {
        lock.validityMs = msg.validity_ms;
        lock._validUntil = pending.sent + msg.validity_ms;
        lock._ttlMs = fields.ttl_ms;
        this._scheduleHeld();
      }
    } else if (op === 'resume') {
      const lock = this._toResume.get(fields.token);
      if (!lock) {
        // Given up meanwhile (released, or its validity ran out): nobody holds it now.
        this.release(fields.resource, fields.token).catch(() => {});
        return;
      }
      this._toResume.delete(fields.token);
      this._locks.set(fields.token, lock);
      lock.validityMs = msg.validity_ms;
      lock._validUntil = pending.sent + msg.validity_ms;
      this._scheduleHeld();
    } else if (op === 'unobserve') {
      const observation = this._observations.get(fields.name);
      if (observation) {
        this._observations.delete(fields.name);
        observation._end('unobserved');
      }
    }
  }

  // Ends what the reply of an abandoned request granted: nobody holds it to end it later.
  _giveBack(pending, msg) {
    const ignore = () => {};
    if (pending.op === 'acquire') {
      for (const g of msg.resources ?? [msg]) this.release(g.resource, g.token).catch(ignore);
    }
    else if (pending.op === 'campaign') this.resign(msg.name, msg.token).catch(ignore);
    else if (pending.op === 'observe') {
      // The agent now follows the name from this reply on. An Observation of it already here
      // goes on receiving the events, and so will the one an observe of it sent after this one
      // makes (an unobserve now would reach the agent after that observe, and stop it); without
      // either, nobody wants them.
      const later = [...this._pending.values()].some(
        (p) => p.op === 'observe' && !p.abandoned && p.fields.name === msg.name);
      if (!this._observations.has(msg.name) && !later) {
        this.request('unobserve', { name: msg.name }).catch(ignore);
      }
    }
  }
}

// The methods of the connection's end, of resuming and of the client's end (resume.js).
mixInResuming(Client);

module.exports = {
  Client, Lock, LockSet, Leadership, Observation, LockError, defaultSocket, DEFAULT_SOCKET,
};
