'use strict';
// The mutex: a plain exclusive hold, fenced, renewed, extended, lost; and what every kind shares
// (the connection's end releases, replies matched by id).

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const { once } = require('node:events');
const { setTimeout: sleep } = require('node:timers/promises');
const { LockError } = require('lockwarden');
const {
  CONTROLLED, WAIT_MS, HOLD_MS, limit, needsHarness, control, rejectsWith, clientPair, waitQueued,
} = require('./harness');

describe('mutex', () => {
  const c = clientPair();

  test('acquire and release', limit, async () => {
    await c.a.withLock('js:basic', { ttlMs: 10000, waitMs: WAIT_MS }, async (lock) => {
      assert.match(lock.token, /^[0-9a-f]{40}$/);
      assert.ok(lock.validityMs > 5000, String(lock.validityMs));
      assert.deepEqual([lock.mode, lock.permit, lock.fence, lock.detached], ['exclusive', null, null, false]);
      assert.deepEqual((await c.a.held()).map((l) => l.resource), ['js:basic']);
      if (CONTROLLED) assert.equal(await control('count js:basic'), '5');
    });
    assert.deepEqual(await c.a.held(), []);
    if (CONTROLLED) assert.equal(await control('count js:basic'), '0');
  });

  test('timeout when another connection holds it', limit, async () => {
    // withLock without options: one attempt, the agent's default ttl (a free lock is granted).
    const result = await c.a.withLock('js:busy', async (lock) => {
      assert.equal(lock.released, false);
      await rejectsWith(c.b.acquire('js:busy', { ttlMs: 10000, waitMs: 200 }), 'timeout');
      return 'done';
    });
    assert.equal(result, 'done');
    assert.deepEqual(await c.a.held(), []);
  });

  test('a waiter gets the lock when the holder releases', limit, async () => {
    const holder = await c.a.acquire('js:queue', { ttlMs: 10000, waitMs: WAIT_MS });
    const waiting = c.b.acquire('js:queue', { ttlMs: 10000, waitMs: 30000 });
    waiting.catch(() => {}); // a rejection is reported by the await below, not as unhandled
    await waitQueued(c.a, 'js:queue'); // release only once b is really waiting
    // b queued before now: held HOLD_MS longer, it has waited at least that long when granted.
    await sleep(HOLD_MS);
    await holder.release();
    const lock = await waiting;
    assert.ok(lock.waitedMs >= HOLD_MS, String(lock.waitedMs));
    await lock.release();
  });

  test('fenced grants carry increasing fences', limit, async () => {
    const first = await c.a.acquire('js:fence', { ttlMs: 10000, waitMs: WAIT_MS, fence: true });
    assert.ok(Number.isInteger(first.fence), String(first.fence));
    await first.release();
    const second = await c.b.acquire('js:fence', { ttlMs: 10000, waitMs: WAIT_MS, fence: true });
    assert.ok(second.fence > first.fence, `${second.fence} after ${first.fence}`);
    await second.release();
  });

  test('renew keeps the lock past its ttl', limit, async () => {
    // A ttl long enough that a renewal every ttl/3 on a loaded machine is never late; the sleep
    // is the point of the test: 3 ttls pass, and only renewals keep the lock.
    const lock = await c.a.acquire('js:renew', { ttlMs: 2000, waitMs: WAIT_MS, renew: true });
    await sleep(6000);
    assert.equal(lock.lost, null);
    assert.equal((await c.a.held())[0].renew, true);
    await rejectsWith(c.b.acquire('js:renew', { ttlMs: 1000, waitMs: 200 }), 'timeout');
    await lock.release();
  });

  test('explicit extend', limit, async () => {
    // 5 s: enough to still hold it when the extend arrives; 20 s after: over 10 s is the new ttl.
    const lock = await c.a.acquire('js:extend', { ttlMs: 5000, waitMs: WAIT_MS });
    assert.ok((await lock.extend(20000)) > 10000);
    assert.ok(lock.validityMs > 10000);
    assert.ok((await c.a.held())[0].validity_ms > 10000);
    if (CONTROLLED) assert.ok(Number(await control('pttl js:extend')) > 10000);
    await lock.release();
  });

  test('a lock without renew expires and is reported lost', limit, async () => {
    const lock = await c.a.acquire('js:expire', { ttlMs: 1000, waitMs: WAIT_MS });
    // On a stalled machine the `lost` line can arrive in the same read as the grant, before a
    // listener could be added: it is then already in lock.lost.
    const reason = lock.lost ?? (await once(lock, 'lost'))[0];
    assert.equal(reason, 'expired');
    assert.equal(lock.signal.aborted, true);
    assert.ok(lock.signal.reason instanceof LockError);
    assert.equal(lock.signal.reason.code, 'lost');
    await rejectsWith(lock.extend(1000), 'lost');
  });

  test('lost when renewal fails', needsHarness, async () => {
    const options = { ttlMs: 2000, waitMs: WAIT_MS, renew: true };
    const work = c.a.withLock('js:lost', options, async (lock) => {
      await control('flush'); // the keys vanish: the next renewal finds the lock gone
      if (!lock.signal.aborted) await once(lock.signal, 'abort'); // it may come before the answer
      assert.equal(lock.lost, 'renew_failed');
    });
    await rejectsWith(work, 'lost');
    assert.deepEqual(await c.a.held(), []);
  });

  test('no_quorum when a majority of masters is down', needsHarness, async () => {
    await control('kill-majority');
    try {
      await rejectsWith(c.a.acquire('js:quorum', { ttlMs: 1000, waitMs: 100 }), 'no_quorum');
    } finally {
      await control('restore');
    }
    await (await c.a.acquire('js:quorum', { ttlMs: 1000, waitMs: WAIT_MS })).release();
  });

  test('closing the connection releases its locks', limit, async () => {
    const lock = await c.a.acquire('js:close', { ttlMs: 10000, waitMs: WAIT_MS });
    const closed = once(c.a, 'close');
    await c.a.close();
    await closed;
    assert.equal(lock.lost, 'disconnected');
    // Released once the agent has seen the connection end: well before b's wait runs out.
    await (await c.b.acquire('js:close', { ttlMs: 1000, waitMs: WAIT_MS })).release();
    await rejectsWith(c.a.ping(), 'disconnected');
  });

  test('replies are matched by id, not by order', limit, async () => {
    const holder = await c.a.acquire('js:order', { ttlMs: 10000, waitMs: WAIT_MS });
    const slow = c.b.acquire('js:order', { ttlMs: 1000, waitMs: 300 }); // answered last
    const slowChecked = rejectsWith(slow, 'timeout'); // handled now, whenever it is answered
    await c.b.ping();
    await slowChecked;
    await holder.release();
  });
});
