'use strict';
// Tests of lockwarden.js against a live agent at $LOCKWARDEN_SOCKET with real masters:
// `node lockwarden.test.js` (node --test works too, without the harness).
//
// Run by tests/integration/clients_test.cc, which starts 5 redis-server masters and the agent and
// sets LWTEST_CONTROL=stdio: a test that needs the masters changed prints `@@lw <action>` on
// stdout and reads the harness's answer from stdin (clients/README.md#tests). Without
// LWTEST_CONTROL, those tests are skipped.

const { test, beforeEach, afterEach, after } = require('node:test');
const assert = require('node:assert/strict');
const { once } = require('node:events');
const readline = require('node:readline');
const { setTimeout: sleep } = require('node:timers/promises');
const { Client, LockError } = require('./lockwarden');

const CONTROLLED = process.env.LWTEST_CONTROL === 'stdio';
// These tests must pass the same way on a loaded machine (and against an ASan-built agent), so
// nothing here depends on how fast anything is: an acquire that must succeed waits (a free lock
// is granted at once; the wait only lets the agent retry when a master answered too slowly), an
// event is awaited with a generous deadline (only a failing test waits it out), and a validity is
// only checked to come from the ttl asked for (more than half of it), not to the ms.
const WAIT_MS = 10000;
const EVENT_MS = 15000;
const HOLD_MS = 50; // how long a queued waiter is kept waiting: its waitedMs is at least this
const limit = { timeout: 20000 }; // a test waiting for an event that never comes fails
const needsHarness = CONTROLLED ? limit : { skip: 'needs the harness (LWTEST_CONTROL=stdio)' };

let stdin = null; // the harness's answers, one per line
let answers = null;
after(() => stdin && stdin.close()); // else the open stdin keeps the process alive
// Asks the harness to act on the masters; resolves to its answer after "ok ".
async function control(action) {
  if (!stdin) {
    stdin = readline.createInterface({ input: process.stdin });
    answers = stdin[Symbol.asyncIterator]();
  }
  process.stdout.write(`@@lw ${action}\n`);
  const { value } = await answers.next();
  if (!value || !value.startsWith('ok')) throw new Error(`harness could not ${action}: ${value}`);
  return value.slice(3);
}

async function rejectsWith(promise, code) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof LockError, String(err));
    assert.equal(err.code, code);
    return true;
  });
}

let a;
let b;
beforeEach(async () => {
  a = await Client.connect();
  b = await Client.connect();
});
afterEach(async () => {
  await a.close();
  await b.close();
});

test('acquire and release', limit, async () => {
  await a.withLock('js:basic', { ttlMs: 10000, waitMs: WAIT_MS }, async (lock) => {
    assert.match(lock.token, /^[0-9a-f]{40}$/);
    assert.ok(lock.validityMs > 5000, String(lock.validityMs));
    assert.deepEqual((await a.held()).map((l) => l.resource), ['js:basic']);
    if (CONTROLLED) assert.equal(await control('count js:basic'), '5');
  });
  assert.deepEqual(await a.held(), []);
  if (CONTROLLED) assert.equal(await control('count js:basic'), '0');
});

test('timeout when another connection holds it', limit, async () => {
  const lock = await a.acquire('js:busy', { ttlMs: 10000, waitMs: WAIT_MS });
  await rejectsWith(b.acquire('js:busy', { ttlMs: 10000, waitMs: 200 }), 'timeout');
  await lock.release();
});

test('a semaphore admits K holders and refuses another size', limit, async () => {
  const first = await a.acquire('js:pool', { ttlMs: 10000, waitMs: WAIT_MS, permits: 2 });
  const second = await b.acquire('js:pool', { ttlMs: 10000, waitMs: WAIT_MS, permits: 2 });
  assert.deepEqual([first.mode, second.mode], ['permit', 'permit']);
  assert.deepEqual([first.permit, second.permit].sort(), [0, 1]);
  const third = await Client.connect();
  try {
    await rejectsWith(third.acquire('js:pool', { ttlMs: 10000, permits: 2 }), 'timeout');
    await rejectsWith(third.acquire('js:pool', { ttlMs: 10000, permits: 3 }), 'kind_mismatch');
  } finally {
    await third.close();
  }
  await first.release();
  await second.release();
});

test('shared holds share and keep the exclusive hold out', limit, async () => {
  const r1 = await a.acquire('js:cfg', { ttlMs: 10000, waitMs: WAIT_MS, shared: true });
  const r2 = await b.acquire('js:cfg', { ttlMs: 10000, waitMs: WAIT_MS, shared: true });
  assert.deepEqual([r1.mode, r2.mode, r1.permit], ['shared', 'shared', null]);
  const writer = await Client.connect();
  try {
    await rejectsWith(writer.acquire('js:cfg', { ttlMs: 10000 }), 'timeout');
  } finally {
    await writer.close();
  }
  await r1.release();
  await r2.release();
  await rejectsWith(a.acquire('js:cfg', { permits: 2, shared: true }), 'bad_request');
});

test('a waiter gets the lock when the holder releases', limit, async () => {
  const holder = await a.acquire('js:queue', { ttlMs: 10000, waitMs: WAIT_MS });
  const waiting = b.acquire('js:queue', { ttlMs: 10000, waitMs: 30000 });
  waiting.catch(() => {}); // a rejection is reported by the await below, not as unhandled
  // The agent lists queued requests: release only once b is really waiting.
  const deadline = Date.now() + EVENT_MS;
  for (;;) {
    const { locks } = await a.request('locks');
    if (locks.some((l) => l.resource === 'js:queue' && l.waiters === 1)) break;
    assert.ok(Date.now() < deadline, 'b never queued');
    await sleep(10);
  }
  // b queued before now: held HOLD_MS longer, it has waited at least that long when granted.
  await sleep(HOLD_MS);
  await holder.release();
  const lock = await waiting;
  assert.ok(lock.waitedMs >= HOLD_MS, String(lock.waitedMs));
  await lock.release();
});

test('renew keeps the lock past its ttl', limit, async () => {
  // A ttl long enough that a renewal every ttl/3 on a loaded machine is never late; the sleep
  // is the point of the test: 3 ttls pass, and only renewals keep the lock.
  const lock = await a.acquire('js:renew', { ttlMs: 2000, waitMs: WAIT_MS, renew: true });
  await sleep(6000);
  assert.equal(lock.lost, null);
  assert.equal((await a.held())[0].renew, true);
  await rejectsWith(b.acquire('js:renew', { ttlMs: 1000, waitMs: 200 }), 'timeout');
  await lock.release();
});

test('explicit extend', limit, async () => {
  // 5 s: enough to still hold it when the extend arrives; 20 s after: over 10 s is the new ttl.
  const lock = await a.acquire('js:extend', { ttlMs: 5000, waitMs: WAIT_MS });
  assert.ok((await lock.extend(20000)) > 10000);
  assert.ok((await a.held())[0].validity_ms > 10000);
  if (CONTROLLED) assert.ok(Number(await control('pttl js:extend')) > 10000);
  await lock.release();
});

test('a lock without renew expires and is reported lost', limit, async () => {
  const lock = await a.acquire('js:expire', { ttlMs: 1000, waitMs: WAIT_MS });
  // On a stalled machine the `lost` line can arrive in the same read as the grant, before a
  // listener could be added: it is then already in lock.lost.
  const reason = lock.lost ?? (await once(lock, 'lost'))[0];
  assert.equal(reason, 'expired');
  await rejectsWith(lock.extend(1000), 'lost');
});

test('lost when renewal fails', needsHarness, async () => {
  const options = { ttlMs: 2000, waitMs: WAIT_MS, renew: true };
  const work = a.withLock('js:lost', options, async (lock) => {
    await control('flush'); // the keys vanish: the next renewal finds the lock gone
    if (!lock.signal.aborted) await once(lock.signal, 'abort'); // it may come before the answer
    assert.equal(lock.lost, 'renew_failed');
  });
  await rejectsWith(work, 'lost');
  assert.deepEqual(await a.held(), []);
});

test('no_quorum when a majority of masters is down', needsHarness, async () => {
  await control('kill-majority');
  try {
    await rejectsWith(a.acquire('js:quorum', { ttlMs: 1000, waitMs: 100 }), 'no_quorum');
  } finally {
    await control('restore');
  }
  await (await a.acquire('js:quorum', { ttlMs: 1000, waitMs: WAIT_MS })).release();
});

test('closing the connection releases its locks', limit, async () => {
  await a.acquire('js:close', { ttlMs: 10000, waitMs: WAIT_MS });
  await a.close();
  // Released once the agent has seen the connection end: well before b's wait runs out.
  await (await b.acquire('js:close', { ttlMs: 1000, waitMs: WAIT_MS })).release();
  await rejectsWith(a.ping(), 'disconnected');
});

test('replies are matched by id, not by order', limit, async () => {
  const holder = await a.acquire('js:order', { ttlMs: 10000, waitMs: WAIT_MS });
  const slow = b.acquire('js:order', { ttlMs: 1000, waitMs: 300 }); // answered last
  const slowChecked = rejectsWith(slow, 'timeout'); // handled now, whenever it is answered
  await b.ping();
  await slowChecked;
  await holder.release();
});

// Resolves once the agent lists a request of another connection waiting for `resource`.
async function waitQueued(resource) {
  const deadline = Date.now() + EVENT_MS;
  for (;;) {
    const { locks } = await a.request('locks');
    if (locks.some((l) => l.resource === resource && l.waiters === 1)) return;
    assert.ok(Date.now() < deadline, `nobody queued for ${resource}`);
    await sleep(10);
  }
}

test('an election hands over on resign with a higher term', limit, async () => {
  const first = await a.campaign('js:elect', 'host-a:1', { ttlMs: 10000, waitMs: WAIT_MS });
  assert.ok(Number.isInteger(first.term), String(first.term));
  assert.match(first.token, /^[0-9a-f]{40}$/);
  const leader = await b.leader('js:elect');
  assert.deepEqual([leader.value, leader.term, leader.pid], ['host-a:1', first.term, process.pid]);
  const watcher = await Client.connect();
  try {
    const observation = await watcher.observe('js:elect');
    assert.equal(observation.leader.value, 'host-a:1');
    let elected = false;
    const waiting = b.campaign('js:elect', 'host-b:2', { ttlMs: 10000, waitMs: 30000 });
    waiting.then(() => { elected = true; }, () => {});
    await waitQueued('js:elect');
    assert.equal(elected, false); // b waits while a leads
    await first.resign();
    const second = await waiting;
    assert.ok(second.term > first.term, `${second.term} after ${first.term}`);
    assert.equal((await a.leader('js:elect')).value, 'host-b:2');
    // Events come in term order: wait for the one naming b (it may be in already).
    while (observation.leader === null || observation.leader.value !== 'host-b:2') {
      const [event] = await once(observation, 'leader');
      assert.ok(event.term >= first.term, String(event.term));
    }
    assert.deepEqual([observation.term, observation.leader.term], [second.term, second.term]);
    await observation.unobserve();
    assert.equal(observation.ended, 'unobserved');
    await rejectsWith(b.resign('js:elect', first.token), 'not_held');
    assert.deepEqual((await b.held()).map((l) => l.resource), ['js:elect']);
    await second.resign();
    assert.equal(await a.leader('js:elect'), null);
  } finally {
    await watcher.close();
  }
});

test('a detached lease outlives its connection', limit, async () => {
  const lease = await a.acquire('js:lease', { ttlMs: 60000, waitMs: WAIT_MS, detach: true });
  assert.equal(lease.detached, true);
  await a.close();
  assert.equal(lease.lost, null);
  await rejectsWith(b.acquire('js:lease', { ttlMs: 1000 }), 'timeout');
  assert.ok((await b.extend('js:lease', lease.token, 30000)) > 15000);
  await b.release('js:lease', lease.token);
  await rejectsWith(b.release('js:lease', lease.token), 'not_held');
  await (await b.acquire('js:lease', { ttlMs: 1000 })).release();
});
