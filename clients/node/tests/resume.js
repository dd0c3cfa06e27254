'use strict';
// The agent restarts (kill -9, then a new run on the same socket) under a client's lock: the
// client reconnects and resumes it through the new run, or reports it lost if the new run cannot
// take it over (docs/protocol.md#resume).

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const { once } = require('node:events');
const { setTimeout: sleep } = require('node:timers/promises');
const { LockError } = require('lockwarden');
const { WAIT_MS, EVENT_MS, needsHarness, control, clientPair } = require('./harness');

// Resolves once client's (new) connection lists token; until then held() rejects
// 'disconnected' (no connection yet) or lists nothing (its resume on the way). losses: the
// hold's 'lost' reasons, which must stay empty meanwhile.
async function awaitHeld(client, token, losses, what) {
  const deadline = Date.now() + EVENT_MS;
  for (;;) {
    const held = await client.held().catch((err) => {
      if (!(err instanceof LockError) || err.code !== 'disconnected') throw err;
      return [];
    });
    if (held.some((l) => l.token === token)) return;
    assert.deepEqual(losses, []);
    assert.ok(Date.now() < deadline, `the ${what} was not resumed`);
    await sleep(20);
  }
}

describe('agent restart', () => {
  const c = clientPair();

  test('a renewed lock is resumed after the agent restarts', needsHarness, async () => {
    const lock = await c.a.acquire('js:resume', { ttlMs: 4000, waitMs: WAIT_MS, renew: true });
    const losses = [];
    lock.on('lost', (reason) => losses.push(reason));
    const events = [];
    c.a.on('resuming', () => events.push('resuming'));
    c.a.on('resumed', () => events.push('resumed'));
    await control('restart-agent');
    await awaitHeld(c.a, lock.token, losses, 'lock');
    // 'resumed' comes once every resume round settled, which the held reply may overtake.
    if (!events.includes('resumed')) await once(c.a, 'resumed');
    assert.deepEqual(events, ['resuming', 'resumed']);
    // Past its ttl: only the new run's renewals keep it on the masters.
    await sleep(4500);
    assert.equal(await control('count js:resume'), '5');
    assert.deepEqual(losses, []);
    assert.equal(lock.lost, null);
    await lock.release();
    assert.equal(await control('count js:resume'), '0');
  });

  test('a leadership is resumed after the agent restarts', needsHarness, async () => {
    const leadership = await c.a.campaign('js:lead', 'host-a:1', { ttlMs: 4000, waitMs: WAIT_MS });
    const losses = [];
    leadership.on('lost', (reason) => losses.push(reason));
    await control('restart-agent');
    await awaitHeld(c.a, leadership.token, losses, 'leadership');
    const leader = await c.a.leader('js:lead'); // b held nothing: it did not reconnect
    assert.equal(leader.term, leadership.term);
    await sleep(4500); // past its ttl: only the new run's renewals keep it
    assert.equal(await control('count js:lead'), '5');
    assert.deepEqual(losses, []);
    await leadership.resign();
    assert.equal(await c.a.leader('js:lead'), null);
  });

  test('a lock whose keys are gone is reported lost after the agent restarts', needsHarness, async () => {
    const lock = await c.a.acquire('js:resume-gone', { ttlMs: 2000, waitMs: WAIT_MS, renew: true });
    await control('flush'); // the new run finds nothing to take over
    await control('restart-agent');
    const started = Date.now();
    const reason = lock.lost ?? (await once(lock, 'lost'))[0];
    // The new run answers the resume not_held; or the old one found the keys gone first.
    assert.ok(['agent_lost', 'renew_failed'].includes(reason), reason);
    assert.ok(Date.now() - started < EVENT_MS, `lost after ${Date.now() - started} ms`);
    assert.equal(lock.signal.aborted, true);
    assert.equal(lock.signal.reason.code, 'lost');
  });
});
