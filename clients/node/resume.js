'use strict';
// The Client's resuming of its locks through the agent's next run (docs/protocol.md#resume; see
// the top of lockwarden.js): what the connection's end does, the reconnections with backoff, the
// resume rounds and their refusals (lost as agent_lost), the locks whose validity runs out first
// (agent_lost too), the client's end, and the `held` reads of the renewed locks' validity. These
// are methods of Client, installed on its prototype by lockwarden.js (mixInto); the resuming's
// state is the Client's (its constructor), the same fields these methods read and set.

const net = require('net');
const { LockError, emitEach, now } = require('./lock');

const DEFAULT_TTL_MS = 30000; // the agent's, for a lock acquired without ttlMs
const RECONNECT_FIRST_MS = 50; // the backoff between reconnections: doubling up to the cap
const RECONNECT_MAX_MS = 500;
const HELD_MIN_MS = 100; // `held` reads of the renewed locks' validity: at most this often
// The resume refusals that will never turn into a success: the lock is lost. Anything else
// (no_quorum, shutting_down, too_many, internal, the connection's end) is tried again.
const RESUME_FINAL = new Set(['not_held', 'forbidden', 'kind_mismatch', 'bad_request']);

class Resuming {
  // A lock lost: the client keeps it no more.
  _forget(lock) {
    if (this._locks.get(lock.token) === lock) this._locks.delete(lock.token);
    if (this._toResume.get(lock.token) === lock) this._toResume.delete(lock.token);
  }

  // The connection `socket` is gone: every request waiting rejects 'disconnected', every
  // observation ends. The locks and leaderships are resumed through
  // the agent's next run (see _advance), unless close() or a bad line ended it, or the client
  // has no path to reconnect to: they are lost ('disconnected') then, and the client is done.
  _onClose(socket) {
    if (socket !== this._socket) return; // a connection already replaced, or ended by _fail
    this._socket = null;
    this._buffer = '';
    this._stopHeld();
    const reason = this._closed || 'connection closed by the agent';
    this._closed = reason;
    const resume = Boolean(this._path) && !this._userClosed && !this._noResume;
    const pending = [...this._pending.values()];
    const locks = [...this._locks.values()];
    const observations = [...this._observations.values()];
    this._pending.clear();
    this._locks.clear();
    this._observations.clear();
    for (const lock of locks) {
      if (resume && lock._resumable()) this._toResume.set(lock.token, lock);
    }
    for (const p of pending) p.reject(new LockError('disconnected', reason));
    for (const lock of locks) if (!this._toResume.has(lock.token)) lock._markLost('disconnected');
    for (const observation of observations) observation._end('disconnected');
    if (!resume || !this._toResume.size) {
      this._finish(reason);
      return;
    }
    if (!this._resuming) {
      this._resuming = true;
      this._backoff = RECONNECT_FIRST_MS;
      emitEach(this, 'resuming', reason);
    }
    this._advance();
  }

  // What resuming does next: once nothing is left to resume, 'resumed' if connected, else done;
  // otherwise the next reconnection or resume round after the backoff, and a timer for the
  // earliest validity.
  _advance() {
    if (this._ended) return;
    if (!this._toResume.size) {
      clearTimeout(this._retryTimer);
      clearTimeout(this._expiryTimer);
      this._retryTimer = this._expiryTimer = null;
      if (!this._resuming) return;
      this._resuming = false;
      if (this._socket) {
        this._backoff = RECONNECT_FIRST_MS;
        emitEach(this, 'resumed');
      } else {
        this._finish(this._closed);
      }
      return;
    }
    clearTimeout(this._expiryTimer);
    const first = Math.min(...[...this._toResume.values()].map((lock) => lock._validUntil));
    this._expiryTimer = setTimeout(() => this._expire(), Math.max(0, first - now()) + 1);
    if (!this._retryTimer && !this._connecting && !this._round) {
      this._retryTimer = setTimeout(() => this._resumeStep(), this._backoff);
      this._backoff = Math.min(this._backoff * 2, RECONNECT_MAX_MS);
    }
  }

  // The locks to resume whose validity has passed are lost: the app must not go on believing
  // it holds them.
  _expire() {
    this._expiryTimer = null;
    const t = now();
    for (const lock of [...this._toResume.values()]) {
      if (lock._validUntil <= t && this._toResume.get(lock.token) === lock) {
        lock._markLost('agent_lost', 'its validity ran out before the agent could resume it');
      }
    }
    this._advance();
  }

  // Reconnects, or, connected, sends the resumes.
  _resumeStep() {
    this._retryTimer = null;
    if (this._ended || !this._toResume.size) return;
    if (this._socket) {
      this._resumeRound();
      return;
    }
    const socket = net.createConnection(this._path);
    this._connecting = socket;
    const failed = () => {
      if (this._connecting !== socket) return;
      this._connecting = null;
      socket.destroy();
      this._advance();
    };
    socket.once('error', failed);
    socket.once('connect', () => {
      socket.off('error', failed);
      if (this._connecting !== socket) {
        socket.destroy();
        return;
      }
      this._connecting = null;
      this._attach(socket);
      this._resumeRound();
    });
  }

  // Sends a resume for each lock to resume, on this connection. ok: held again (_recordEnd);
  // a final refusal: lost ('agent_lost'); anything else: tried again after the backoff.
  async _resumeRound() {
    this._round = true;
    const locks = [...this._toResume.values()];
    const resume = (lock) => this.request('resume', lock._resumeFields()).catch((err) => {
      if (RESUME_FINAL.has(err.code) && this._toResume.get(lock.token) === lock) {
        lock._markLost('agent_lost', err.message);
      }
    });
    await Promise.all(locks.map(resume));
    this._round = false;
    this._advance();
  }

  // Done: timers stopped, the locks still to resume lost ('disconnected'), 'close'. Once only.
  _finish(reason) {
    if (this._ended) return;
    this._ended = true;
    this._resuming = false;
    this._closed = this._closed || reason || 'closed';
    clearTimeout(this._retryTimer);
    clearTimeout(this._expiryTimer);
    this._stopHeld();
    if (this._connecting) this._connecting.destroy();
    this._connecting = null;
    const locks = [...this._toResume.values()];
    this._toResume.clear();
    for (const lock of locks) lock._markLost('disconnected');
    emitEach(this, 'close', this._closed);
    for (const resolve of this._closeWaiters.splice(0)) resolve();
  }

  // Reads `held` every third of the smallest ttl among the renewed locks of this connection (at
  // most every HELD_MIN_MS): each such lock is valid until the read was sent plus its
  // validity_ms. Unreferenced: the connection keeps the process alive, not this timer.
  _scheduleHeld() {
    if (!this._socket) return;
    let ttl = Infinity;
    for (const lock of this._locks.values()) {
      if (lock._renew && lock._resumable()) ttl = Math.min(ttl, lock._ttlMs ?? DEFAULT_TTL_MS);
    }
    if (ttl === Infinity) return; // read again when the timer fires, if one is set
    const interval = Math.max(HELD_MIN_MS, ttl / 3);
    const due = now() + interval;
    if (this._heldTimer && this._heldDue <= due) return;
    clearTimeout(this._heldTimer);
    this._heldDue = due;
    this._heldTimer = setTimeout(() => this._pollHeld(), interval);
    this._heldTimer.unref();
  }

  _pollHeld() {
    this._heldTimer = null;
    if (!this._socket) return;
    const sent = now();
    this.request('held').then(({ locks }) => {
      for (const entry of locks || []) {
        const lock = this._locks.get(entry.token);
        if (lock && lock._renew && lock._resumable()) lock._validUntil = sent + entry.validity_ms;
      }
    }, () => {}); // the connection's end: the validity known so far stands
    this._scheduleHeld();
  }

  _stopHeld() {
    clearTimeout(this._heldTimer);
    this._heldTimer = null;
  }
}

// Installs Resuming's methods on the prototype of `Client`, as its own methods are (not
// enumerable).
function mixInto(Client) {
  for (const name of Object.getOwnPropertyNames(Resuming.prototype)) {
    if (name === 'constructor') continue;
    Object.defineProperty(Client.prototype, name,
      Object.getOwnPropertyDescriptor(Resuming.prototype, name));
  }
}

module.exports = { mixInto, RECONNECT_FIRST_MS };
