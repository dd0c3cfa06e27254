'use strict';
// The semaphore (permits), the read-write lock (shared) and the detached lease (detach).

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('lockwarden');
const { WAIT_MS, limit, rejectsWith, clientPair, waitQueued } = require('./harness');

describe('semaphore', () => {
  const c = clientPair();

  test('a semaphore admits K holders and refuses another size', limit, async () => {
    const first = await c.a.acquire('js:pool', { ttlMs: 10000, waitMs: WAIT_MS, permits: 2 });
    const second = await c.b.acquire('js:pool', { ttlMs: 10000, waitMs: WAIT_MS, permits: 2 });
    assert.deepEqual([first.mode, second.mode], ['permit', 'permit']);
    assert.deepEqual([first.permit, second.permit].sort(), [0, 1]);
    const third = await Client.connect();
    try {
      await rejectsWith(third.acquire('js:pool', { ttlMs: 10000, permits: 2 }), 'timeout');
      await rejectsWith(third.acquire('js:pool', { ttlMs: 10000, permits: 3 }), 'kind_mismatch');
      await first.release(); // a permit free again: the third holder gets it
      const freed = await third.acquire('js:pool', { ttlMs: 10000, waitMs: WAIT_MS, permits: 2 });
      assert.equal(freed.permit, first.permit);
    } finally {
      await third.close();
    }
    await second.release();
  });
});

describe('owners', () => {
  const c = clientPair();

  test('an owner asking again is would_deadlock, or reentrant; other acquires wait', limit, async () => {
    const lock = await c.a.acquire('js:again', { ttlMs: 10000, waitMs: WAIT_MS, owner: 7 });
    await rejectsWith(c.a.acquire('js:again', { ttlMs: 10000, waitMs: 30000, owner: 7 }),
      'would_deadlock');
    const inner = await c.a.acquire('js:again', { ttlMs: 10000, waitMs: WAIT_MS, owner: 7,
      reentrant: true });
    assert.equal(inner, lock);
    assert.equal(lock.depth, 2);
    await inner.release();
    assert.deepEqual([lock.depth, lock.released], [1, false]);
    // Without an owner each acquire is its own: it waits for the hold, as another caller would.
    const other = c.a.acquire('js:again', { ttlMs: 10000, waitMs: 30000 });
    other.catch(() => {}); // a rejection is reported by the await below
    await waitQueued(c.b, 'js:again');
    await lock.release();
    assert.equal(lock.released, true);
    await (await other).release();
  });
});

describe('several resources', () => {
  const c = clientPair();

  test('several resources are taken all or none and held together', limit, async () => {
    const locks = await c.a.acquireAll(['js:set-b', 'js:set-a'], { ttlMs: 2000, waitMs: WAIT_MS });
    const lost = new Promise((resolve) => locks.once('lost', resolve));
    // Lost together: js:set-a expires (not renewed) while js:set-b, extended far past it, is
    // held; the set then lets go of js:set-b.
    await locks.get('js:set-b').extend(60000);
    assert.deepEqual(locks.locks.map((l) => l.resource), ['js:set-a', 'js:set-b']);
    assert.notEqual(locks.locks[0].token, locks.locks[1].token);
    await rejectsWith(c.b.acquireAll(['js:set-c', 'js:set-b'], { ttlMs: 10000, waitMs: 200 }),
      'timeout');
    assert.deepEqual(await c.b.held(), [], 'all or none: js:set-c is not held either');
    assert.equal(await lost, 'expired');
    assert.equal(locks.signal.aborted, true);
    // The agent drops the hold from its books (and from `held`) when the release starts, and
    // answers the release once the masters have: await both.
    const b = locks.get('js:set-b');
    for (;;) {
      if ((await c.a.held()).length === 0 && b.released) break;
      assert.equal(b.lost, null, 'the set released it; it was not lost');
      await new Promise((r) => setTimeout(r, 10));
    }
  });
});

describe('read-write', () => {
  const c = clientPair();

  test('shared holds share and keep the exclusive hold out', limit, async () => {
    const r1 = await c.a.acquire('js:cfg', { ttlMs: 10000, waitMs: WAIT_MS, shared: true });
    const r2 = await c.b.acquire('js:cfg', { ttlMs: 10000, waitMs: WAIT_MS, shared: true });
    assert.deepEqual([r1.mode, r2.mode, r1.permit], ['shared', 'shared', null]);
    assert.equal((await c.a.held())[0].mode, 'shared');
    const writer = await Client.connect();
    try {
      await rejectsWith(writer.acquire('js:cfg', { ttlMs: 10000 }), 'timeout');
    } finally {
      await writer.close();
    }
    await r1.release();
    await r2.release();
    await rejectsWith(c.a.acquire('js:cfg', { permits: 2, shared: true }), 'bad_request');
  });

  test('a waiting writer gets the lock once the readers release', limit, async () => {
    const reader = await c.a.acquire('js:rw', { ttlMs: 10000, waitMs: WAIT_MS, shared: true });
    const writing = c.b.acquire('js:rw', { ttlMs: 10000, waitMs: 30000 });
    writing.catch(() => {}); // a rejection is reported by the await below
    await waitQueued(c.a, 'js:rw');
    await reader.release();
    const writer = await writing;
    assert.equal(writer.mode, 'exclusive');
    await rejectsWith(c.a.acquire('js:rw', { ttlMs: 10000, shared: true }), 'timeout');
    await writer.release();
  });
});

describe('detached lease', () => {
  const c = clientPair();

  test('a detached lease outlives its connection', limit, async () => {
    const lease = await c.a.acquire('js:lease', { ttlMs: 60000, waitMs: WAIT_MS, detach: true });
    assert.equal(lease.detached, true);
    assert.deepEqual(await c.a.held(), []); // no connection holds it
    await c.a.close();
    assert.equal(lease.lost, null);
    await rejectsWith(c.b.acquire('js:lease', { ttlMs: 1000 }), 'timeout');
    assert.ok((await c.b.extend('js:lease', lease.token, 30000)) > 15000);
    await c.b.release('js:lease', lease.token);
    await rejectsWith(c.b.release('js:lease', lease.token), 'not_held');
    await (await c.b.acquire('js:lease', { ttlMs: 1000 })).release();
  });
});
