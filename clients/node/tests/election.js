'use strict';
// Elections: campaign, resign, leader, observe (events and async iteration), unobserve.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const { once } = require('node:events');
const { Client } = require('lockwarden');
const { WAIT_MS, limit, rejectsWith, clientPair, waitQueued } = require('./harness');

describe('election', () => {
  const c = clientPair();

  test('an election hands over on resign with a higher term', limit, async () => {
    const first = await c.a.campaign('js:elect', 'host-a:1', { ttlMs: 10000, waitMs: WAIT_MS });
    assert.ok(Number.isInteger(first.term), String(first.term));
    assert.match(first.token, /^[0-9a-f]{40}$/);
    assert.deepEqual([first.name, first.resource, first.fence], ['js:elect', 'js:elect', first.term]);
    const leader = await c.b.leader('js:elect');
    assert.deepEqual([leader.value, leader.term, leader.pid], ['host-a:1', first.term, process.pid]);
    const watcher = await Client.connect();
    try {
      const observation = await watcher.observe('js:elect');
      assert.equal(observation.leader.value, 'host-a:1');
      let elected = false;
      const waiting = c.b.campaign('js:elect', 'host-b:2', { ttlMs: 10000, waitMs: 30000 });
      waiting.then(() => { elected = true; }, () => {});
      await waitQueued(c.a, 'js:elect');
      assert.equal(elected, false); // b waits while a leads
      await first.resign();
      const second = await waiting;
      assert.ok(second.term > first.term, `${second.term} after ${first.term}`);
      assert.equal((await c.a.leader('js:elect')).value, 'host-b:2');
      // Events come in term order: wait for the one naming b (it may be in already).
      while (observation.leader === null || observation.leader.value !== 'host-b:2') {
        const [event] = await once(observation, 'leader');
        assert.ok(event.term >= first.term, String(event.term));
      }
      assert.deepEqual([observation.term, observation.leader.term], [second.term, second.term]);
      const ended = once(observation, 'end');
      await observation.unobserve();
      assert.deepEqual(await ended, ['unobserved']);
      assert.equal(observation.ended, 'unobserved');
      await rejectsWith(watcher.unobserve('js:elect'), 'not_held');
      await rejectsWith(c.b.resign('js:elect', first.token), 'not_held');
      assert.deepEqual((await c.b.held()).map((l) => l.resource), ['js:elect']);
      await second.resign();
      assert.equal(await c.a.leader('js:elect'), null);
    } finally {
      await watcher.close();
    }
  });

  test('an observation is an async iterator of the leader events', limit, async () => {
    const observation = await c.b.observe('js:iter');
    assert.deepEqual([observation.leader, observation.term], [null, null]);
    const events = observation[Symbol.asyncIterator]();
    const lead = await c.a.campaign('js:iter', 'host-a:1', { ttlMs: 10000, waitMs: WAIT_MS });
    const elected = await events.next();
    assert.equal(elected.done, false);
    assert.deepEqual([elected.value.name, elected.value.leader.value, elected.value.term],
      ['js:iter', 'host-a:1', lead.term]);
    await lead.resign();
    const gone = await events.next();
    assert.deepEqual([gone.value.leader, gone.value.term], [null, lead.term]);
    // A for-await loop over it ends when the observation does.
    const loop = (async () => {
      const seen = [];
      for await (const event of observation) seen.push(event);
      return seen;
    })();
    await observation.unobserve();
    assert.deepEqual(await loop, []);
    assert.deepEqual(await events.next(), { value: undefined, done: true });
    // Observing again ends the earlier observation; the connection's end ends the iteration
    // with an error.
    const earlier = await c.b.observe('js:iter');
    const earlierEvents = earlier[Symbol.asyncIterator]();
    const later = await c.b.observe('js:iter');
    assert.equal(earlier.ended, 'observed_again');
    assert.deepEqual(await earlierEvents.next(), { value: undefined, done: true });
    // The ended one's unobserve() leaves the name's current observation alone.
    await earlier.unobserve();
    assert.equal(later.ended, null);
    const next = later[Symbol.asyncIterator]().next();
    await c.b.close();
    await rejectsWith(next, 'disconnected');
    assert.equal(later.ended, 'disconnected');
  });

  test('an aborted campaign rejects at once and resigns the late leadership', limit, async () => {
    const first = await c.a.campaign('js:abort-elect', 'host-a:1', { ttlMs: 10000, waitMs: WAIT_MS });
    const controller = new AbortController();
    const reason = new Error('no longer wanted');
    const waiting = c.b.campaign('js:abort-elect', 'host-b:2',
      { ttlMs: 60000, waitMs: 30000, signal: controller.signal });
    const aborted = assert.rejects(waiting, (err) => err === reason);
    await waitQueued(c.a, 'js:abort-elect');
    controller.abort(reason);
    await aborted; // at once: the agent still has b waiting
    await first.resign(); // b's abandoned campaign is elected now, and the client resigns it
    // Kept, b's leadership would last as long as its connection: a could not lead again.
    const again = await c.a.campaign('js:abort-elect', 'host-a:3', { ttlMs: 10000, waitMs: WAIT_MS });
    assert.ok(again.term >= first.term + 2, `${again.term} after ${first.term}: b never led`);
    assert.equal((await c.b.leader('js:abort-elect')).value, 'host-a:3');
    assert.deepEqual(await c.b.held(), []);
    await again.resign();
  });
});
