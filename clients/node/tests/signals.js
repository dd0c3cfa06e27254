'use strict';
// AbortSignals given to acquire: a wait cut short, a late grant given back.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const { WAIT_MS, limit, rejectsWith, clientPair, waitQueued } = require('./harness');

describe('abort signal', () => {
  const c = clientPair();

  test('an aborted acquire rejects at once and gives the late grant back', limit, async () => {
    const holder = await c.a.acquire('js:abort', { ttlMs: 10000, waitMs: WAIT_MS });
    const controller = new AbortController();
    const waiting = c.b.acquire('js:abort', { ttlMs: 60000, waitMs: 30000, signal: controller.signal });
    const aborted = assert.rejects(waiting, { name: 'AbortError' });
    await waitQueued(c.a, 'js:abort');
    controller.abort();
    await aborted; // at once: the agent still has b waiting
    await holder.release(); // b's abandoned acquire gets the lock now, and the client releases it
    // Kept, b's grant would last 60 s: far past this wait.
    await (await c.a.acquire('js:abort', { ttlMs: 1000, waitMs: WAIT_MS })).release();
    assert.deepEqual(await c.b.held(), []);
  });

  test('an acquire with an aborted signal sends nothing', limit, async () => {
    const reason = new Error('cancelled before');
    await assert.rejects(c.b.acquire('js:abort-early', { ttlMs: 60000, signal: AbortSignal.abort(reason) }),
      (err) => err === reason);
    // Sent, it would have been granted (nobody holds it): b would hold it for 60 s, and a time
    // out.
    await (await c.a.acquire('js:abort-early', { ttlMs: 1000, waitMs: WAIT_MS })).release();
    assert.deepEqual(await c.b.held(), []);
  });

  test('withLock takes a signal, and lock.signal tells fn the lock was lost', limit, async () => {
    const holder = await c.a.acquire('js:abort-with', { ttlMs: 10000, waitMs: WAIT_MS });
    const controller = new AbortController();
    let ran = false;
    const work = c.b.withLock('js:abort-with', { ttlMs: 10000, waitMs: 30000, signal: controller.signal },
      () => { ran = true; });
    const aborted = assert.rejects(work, { name: 'AbortError' });
    await waitQueued(c.a, 'js:abort-with');
    controller.abort();
    await aborted;
    assert.equal(ran, false);
    await holder.release();
    // A lock lost while fn awaits lock.signal: withLock rejects with code lost.
    const lost = c.a.withLock('js:abort-with', { ttlMs: 1000, waitMs: WAIT_MS }, async (lock) => {
      await new Promise((resolve, reject) => lock.signal.addEventListener('abort', () => reject(lock.signal.reason)));
    });
    await rejectsWith(lost, 'lost');
  });
});
