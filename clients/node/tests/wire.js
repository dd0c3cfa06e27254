'use strict';
// The client against a scripted agent (fake-agent.js), for lines the real agent does not send,
// or not in one read: a line that is not a JSON object, replies and events read together, whose
// effects must follow their order on the wire.

const { describe, test, beforeEach, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { once } = require('node:events');
const { Client } = require('lockwarden');
const { limit, rejectsWith } = require('./harness');
const { FakeAgent } = require('./fake-agent');

const TOKENS = ['a', 'b', 'c', 'd'].map((c) => c.repeat(40));

describe('wire', () => {
  let agent = null;
  beforeEach(async () => { agent = await FakeAgent.start(); });
  afterEach(async () => { await agent.close(); });

  // A client of the fake agent, and the agent's side of its connection.
  async function connect() {
    const client = await Client.connect(agent.path);
    return { client, conn: await agent.connection() };
  }

  // Resolves to what `call` resolves to once the fake agent answered its request with `reply`
  // (the reply's fields, after the request's id and ok: true).
  async function answered(conn, call, reply = {}) {
    const pending = call();
    const request = await conn.next();
    conn.send({ id: request.id, ok: true, ...reply });
    return pending;
  }

  function grant(conn, client, resource, token) {
    return answered(conn, () => client.acquire(resource, { ttlMs: 10000 }),
      { resource, token, validity_ms: 9990, waited_ms: 0 });
  }

  // Collects the errors thrown to the process (uncaught) while fn runs: resolves to them once
  // `count` came.
  async function uncaught(count, fn) {
    const errors = [];
    let done;
    const all = new Promise((resolve) => { done = resolve; });
    process.setUncaughtExceptionCaptureCallback((err) => {
      errors.push(err);
      if (errors.length === count) done(errors);
    });
    try {
      await fn();
      return await all;
    } finally {
      process.setUncaughtExceptionCaptureCallback(null);
    }
  }

  test('a line that is not a JSON object ends the connection as a dropped one does', limit, async () => {
    for (const bad of ['{"id": 3, "ok": tru', 'null', '"ok"', '[{"id": 3, "ok": true}]']) {
      const { client, conn } = await connect();
      const lock = await grant(conn, client, 'r', TOKENS[0]);
      const observation = await answered(conn, () => client.observe('e'), { name: 'e', leader: null });
      const first = client.ping();
      const second = client.ping();
      const [p1, p2] = [await conn.next(), await conn.next()];
      const lost = once(lock, 'lost');
      const ended = once(observation, 'end');
      const closed = once(client, 'close');
      // The line after the bad one is not read: the second ping gets no reply.
      conn.send({ id: p1.id, ok: true }, bad, { id: p2.id, ok: true });
      assert.equal((await first).ok, true);
      await rejectsWith(second, 'disconnected');
      assert.deepEqual(await lost, ['disconnected'], bad);
      assert.deepEqual(await ended, ['disconnected'], bad);
      const [reason] = await closed;
      assert.ok(reason.includes('not a JSON object') && reason.includes(bad), reason);
      await rejectsWith(client.ping(), 'disconnected');
      await conn.closed; // the client ended the connection
    }
  });

  test('an unobserve ends its observation in reply order, not a newer one', limit, async () => {
    const { client, conn } = await connect();
    const first = await answered(conn, () => client.observe('e'), { name: 'e', leader: null });
    // The replies to unobserve and to observe again, in one read.
    const unobserving = client.unobserve('e');
    const observing = client.observe('e');
    const [u, o] = [await conn.next(), await conn.next()];
    conn.send({ id: u.id, ok: true }, { id: o.id, ok: true, name: 'e', leader: null });
    await unobserving;
    const second = await observing;
    assert.equal(first.ended, 'unobserved');
    assert.equal(second.ended, null);
    const leader = { value: 'host-a:1', agent: 'x', host: 'h', pid: 1, since: 0, term: 7 };
    const heard = once(second, 'leader');
    conn.send({ event: 'leader', name: 'e', leader, term: 7, missed: false });
    assert.equal((await heard)[0].leader.value, 'host-a:1');
    // An unobserve whose request was abandoned (its signal aborted) still ends the observation.
    const controller = new AbortController();
    const abandoned = client.request('unobserve', { name: 'e' }, { signal: controller.signal });
    const request = await conn.next();
    controller.abort();
    await assert.rejects(abandoned, { name: 'AbortError' });
    const ended = once(second, 'end');
    conn.send({ id: request.id, ok: true });
    assert.deepEqual(await ended, ['unobserved']);
  });

  test('a lock released just before the connection ends is not lost', limit, async () => {
    const { client, conn } = await connect();
    const lock = await grant(conn, client, 'r', TOKENS[0]);
    const leadership = await answered(conn, () => client.campaign('e', 'host-a:1'),
      { name: 'e', token: TOKENS[1], term: 4, validity_ms: 9990, waited_ms: 0 });
    const kept = await grant(conn, client, 'k', TOKENS[2]);
    const losses = [];
    for (const l of [lock, leadership, kept]) l.on('lost', (reason) => losses.push([l.resource, reason]));
    const releasing = lock.release();
    const resigning = leadership.resign();
    const [r1, r2] = [await conn.next(), await conn.next()];
    assert.deepEqual([r1.op, r1.token, r2.op, r2.token], ['release', TOKENS[0], 'resign', TOKENS[1]]);
    // The replies, then a line that ends the connection at once, in one read.
    conn.send({ id: r1.id, ok: true }, { id: r2.id, ok: true }, 'not json');
    await releasing;
    await resigning;
    assert.deepEqual(losses, [['k', 'disconnected']]);
    assert.deepEqual([lock.released, lock.lost, leadership.released, leadership.lost], [true, null, true, null]);
    assert.equal(kept.lost, 'disconnected');
  });

  test('an abandoned observe is given back unless a later observe of the name follows it', limit, async () => {
    const { client, conn } = await connect();
    const controller = new AbortController();
    const abandoned = client.request('observe', { name: 'e' }, { signal: controller.signal });
    const r1 = await conn.next();
    controller.abort();
    await assert.rejects(abandoned, { name: 'AbortError' });
    const observing = client.observe('e');
    const r2 = await conn.next();
    conn.send({ id: r1.id, ok: true, name: 'e', leader: null });
    conn.send({ id: r2.id, ok: true, name: 'e', leader: null });
    const observation = await observing;
    // An unobserve sent for the abandoned reply would stop the events of this observation.
    const pinging = client.ping();
    const next = await conn.next();
    assert.equal(next.op, 'ping');
    conn.send({ id: next.id, ok: true });
    await pinging;
    assert.equal(observation.ended, null);
    // Alone, an abandoned observe is given back.
    const other = new AbortController();
    const alone = client.request('observe', { name: 'f' }, { signal: other.signal });
    const r3 = await conn.next();
    other.abort();
    await assert.rejects(alone, { name: 'AbortError' });
    conn.send({ id: r3.id, ok: true, name: 'f', leader: null });
    const giveBack = await conn.next();
    assert.deepEqual([giveBack.op, giveBack.name], ['unobserve', 'f']);
  });

  test('a listener that throws keeps neither the other listeners nor the client from going on', limit, async () => {
    const { client, conn } = await connect();
    const locks = [];
    for (const [i, resource] of ['a', 'b', 'c', 'd'].entries()) {
      locks.push(await grant(conn, client, resource, TOKENS[i]));
    }
    const heard = [];
    const bugs = locks.map((lock) => new Error(`listener of ${lock.resource}`));
    for (const [i, lock] of locks.entries()) {
      if (i % 2 === 0) lock.on('lost', () => { throw bugs[i]; });
      lock.on('lost', (reason) => heard.push([lock.resource, reason]));
    }
    const pinging = client.ping();
    const ping = await conn.next();
    // a's first listener throws: a's second one, b's, and the reply after them still run.
    const thrown = await uncaught(1, async () => {
      conn.send({ event: 'lost', resource: 'a', token: TOKENS[0], reason: 'expired' },
        { event: 'lost', resource: 'b', token: TOKENS[1], reason: 'revoked' },
        { id: ping.id, ok: true });
      await pinging;
    });
    assert.deepEqual(thrown, [bugs[0]]);
    assert.deepEqual(heard, [['a', 'expired'], ['b', 'revoked']]);
    // The connection's end (a line that is not JSON: nothing is resumed): c's first listener
    // throws; d is lost all the same, and 'close' comes.
    const closed = once(client, 'close');
    const again = await uncaught(1, async () => { conn.send('not json'); await closed; });
    assert.deepEqual(again, [bugs[2]]);
    assert.deepEqual(heard.slice(2), [['c', 'disconnected'], ['d', 'disconnected']]);
  });
});
