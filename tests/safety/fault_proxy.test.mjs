// The fault proxy (fault_proxy.mjs) against a real redis-server and plain TCP servers: what
// passes, what a delay, a hold and a reset do to it, and what a closing side does to the other.
// Every wait is for an event or for the proxy's own counters; the only timing asserted is a
// lower bound (a delayed reply is not earlier than its delay).
//
//   node --test tests/safety/fault_proxy.test.mjs

import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  RedisCluster, freePort, makeTempDir, removeTempDir, waitUntil,
} from '../browser/fixture.mjs';
import { redisCommand } from '../browser/clients.mjs';
import { FaultProxy } from './fault_proxy.mjs';

function resp(...args) {
  const bulk = (a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`;
  return `*${args.length}\r\n${args.map(bulk).join('')}`;
}

function portOf(address) {
  return Number(address.split(':')[1]);
}

// A client socket that keeps what it received: waitFor(text) resolves once it has, rejects if
// the socket closes first; closed resolves to {error: code or null, ended: saw the peer's FIN}.
class Conn {
  constructor(sock) {
    this.sock = sock;
    opened.add({ close: () => sock.destroy() });
    this.text = '';
    this.error = null;
    this.ended = false;
    this.waiters = new Set();
    sock.on('data', (buf) => {
      this.text += buf.toString('latin1');
      this.check();
    });
    sock.on('end', () => {
      this.ended = true;
    });
    sock.on('error', (err) => {
      this.error = err.code || err.message;
    });
    this.closed = new Promise((resolve) => sock.on('close', () => {
      this.check(true);
      resolve({ error: this.error, ended: this.ended, text: this.text });
    }));
  }

  // Resolves once the socket is connected, or to the Conn anyway if it closed first.
  static open(address) {
    const conn = new Conn(net.connect({ host: '127.0.0.1', port: portOf(address) }));
    return new Promise((resolve) => {
      conn.sock.once('connect', () => resolve(conn));
      conn.closed.then(() => resolve(conn));
    });
  }

  check(closed = false) {
    for (const w of this.waiters) {
      if (this.text.includes(w.text)) w.resolve(this.text);
      else if (closed) {
        w.reject(new Error(`closed (${this.error ?? 'no error'}) before ` +
          `${JSON.stringify(w.text)}; got ${JSON.stringify(this.text)}`));
      }
      else continue;
      this.waiters.delete(w);
    }
  }

  waitFor(text) {
    return new Promise((resolve, reject) => {
      this.waiters.add({ text, resolve, reject });
      this.check(this.sock.destroyed);
    });
  }

  send(text) {
    this.sock.write(text);
  }
}

// A plain TCP server on a free port: each accepted socket becomes a Conn (in this.conns, and
// announced to the one-shot waiters of next()); onConnect(sock) runs first.
async function plainServer(onConnect = () => {}) {
  const conns = [];
  const waiting = [];
  const server = net.createServer((sock) => {
    const conn = new Conn(sock);
    onConnect(sock);
    conns.push(conn);
    for (const w of waiting.splice(0)) w(conn);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  opened.add({ close: () => server.close() });
  return {
    address: `127.0.0.1:${server.address().port}`,
    conns,
    next: () => new Promise((resolve) => {
      if (conns.length > 0) resolve(conns[conns.length - 1]);
      else waiting.push(resolve);
    }),
    close: () => {
      for (const c of conns) c.sock.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

// A test that waits for an event that never comes fails after this, instead of hanging.
const T = { timeout: 10000 };
const WAIT = { timeoutMs: 9000, intervalMs: 5 };

// Every socket and server a test opened, closed by after() whether the test passed or not.
const opened = new Set();

describe('fault proxy', () => {
  let cluster;
  let redis;
  let dir;
  const proxies = [];

  before(async () => {
    dir = makeTempDir('lw-fault-proxy-');
    cluster = await RedisCluster.start(2);
    redis = cluster.master(0);
  });

  after(async () => {
    for (const o of opened) o.close();
    await Promise.all(proxies.map((p) => p.stop()));
    if (cluster) await cluster.stop();
    if (dir) removeTempDir(dir);
  });

  async function proxyTo(target, id = 'l0') {
    const logPath = path.join(dir, `${proxies.length}.log`);
    const proxy = await FaultProxy.start({ links: [{ id, target }], logPath });
    proxies.push(proxy);
    return proxy;
  }

  async function queued(proxy, id, what, bytes) {
    return waitUntil(async () => {
      const s = (await proxy.stats([id]))[id];
      return s[what] >= bytes ? s : null;
    }, { ...WAIT, what: `${what} >= ${bytes}` });
  }

  it('forwards redis PING, SET, GET both ways, and counts them', T, async () => {
    const proxy = await FaultProxy.start({
      links: [
        { id: 'a0-m0', target: redis.address },
        { id: 'a0-m1', target: cluster.master(1).address },
      ],
      logPath: path.join(dir, 'pass.log'),
    });
    proxies.push(proxy);
    assert.notEqual(proxy.address('a0-m0'), proxy.address('a0-m1'));
    const conn = await Conn.open(proxy.address('a0-m0'));
    conn.send(resp('PING') + resp('SET', 'pass', 'v1') + resp('GET', 'pass'));
    assert.equal(await conn.waitFor('$2\r\nv1\r\n'), '+PONG\r\n+OK\r\n$2\r\nv1\r\n');
    assert.equal(await redisCommand(portOf(proxy.address('a0-m1')), ['PING']), 'PONG');
    const stats = await proxy.stats();
    assert.deepEqual(stats['a0-m0'], { connections: 1, open: 1,
      bytesUp: Buffer.byteLength(resp('PING') + resp('SET', 'pass', 'v1') + resp('GET', 'pass')),
      bytesDown: 20, queuedUp: 0, queuedDown: 0 });
    assert.equal(stats['a0-m1'].connections, 1);
    assert.equal(await redisCommand(redis.port, ['GET', 'pass']), 'v1');
    await assert.rejects(proxy.set(['nope'], { mode: 'pass' }), /no link "nope"/);
    await assert.rejects(proxy.set(['a0-m0'], { mode: 'drop' }), /unknown mode/);
    await proxy.set(['a0-m0', 'a0-m1'], { mode: 'delay', ms: 5, direction: 'up' });
    const log = fs.readFileSync(proxy.logPath, 'utf8');
    assert.ok(log.includes(`a0-m0 listening on ${proxy.address('a0-m0')} -> ${redis.address}`));
    assert.match(log, /set a0-m0,a0-m1: delay 5 ms up\n/);
    conn.sock.end();
    await conn.closed;
  });

  it('delays the replies on "down" by at least ms, in order', T, async () => {
    const proxy = await proxyTo(redis.address);
    const conn = await Conn.open(proxy.address('l0'));
    conn.send(resp('PING'));
    await conn.waitFor('+PONG\r\n');
    await proxy.set(['l0'], { mode: 'delay', ms: 300, direction: 'down' });
    const t0 = performance.now();
    conn.send(resp('SET', 'delay', '1') + resp('INCR', 'delay') + resp('INCR', 'delay'));
    const text = await conn.waitFor(':3\r\n');
    assert.ok(performance.now() - t0 >= 300, `reply after ${performance.now() - t0} ms`);
    assert.equal(text, '+PONG\r\n+OK\r\n:2\r\n:3\r\n');
    await proxy.set(['l0'], { mode: 'pass' });
    conn.sock.destroy();
  });

  it('passes a delayed end on only after the data before it', T, async () => {
    const server = await plainServer((sock) => sock.end('bye'));
    const proxy = await proxyTo(server.address);
    await proxy.set('l0', { mode: 'delay', ms: 200 });
    const t0 = performance.now();
    const conn = await Conn.open(proxy.address('l0'));
    const closed = await conn.closed;
    assert.ok(performance.now() - t0 >= 200);
    assert.deepEqual(closed, { error: null, ended: true, text: 'bye' });
    await server.close();
  });

  it('holds both directions until healed, then delivers in order, end last', T, async () => {
    const server = await plainServer((sock) => sock.write('hello\n'));
    const proxy = await proxyTo(server.address);
    await proxy.set('l0', { mode: 'hold' });
    const conn = await Conn.open(proxy.address('l0'));
    for (const part of ['one ', 'two ', 'three']) conn.send(part);
    conn.sock.end();
    // Once the proxy counts the bytes as queued, neither receiver can have them.
    await queued(proxy, 'l0', 'queuedUp', 13);
    await queued(proxy, 'l0', 'queuedDown', 6);
    const upstream = await server.next();
    assert.equal(upstream.text, '');
    assert.equal(upstream.ended, false);
    assert.equal(conn.text, '');
    await proxy.set('l0', { mode: 'pass' });
    assert.equal(await conn.waitFor('hello\n'), 'hello\n');
    const got = await upstream.closed;
    assert.deepEqual(got, { error: null, ended: true, text: 'one two three' });
    await conn.closed;
    const s = (await proxy.stats())['l0'];
    assert.equal(s.queuedUp + s.queuedDown, 0);
    await server.close();
  });

  it('holds only the replies on "down": the SET reaches redis, its reply waits', T, async () => {
    const proxy = await proxyTo(redis.address);
    const conn = await Conn.open(proxy.address('l0'));
    await proxy.set('l0', { mode: 'hold', direction: 'down' });
    conn.send(resp('SET', 'held', 'v2'));
    await queued(proxy, 'l0', 'queuedDown', 5); // '+OK\r\n': redis has run it
    assert.equal(await redisCommand(redis.port, ['GET', 'held']), 'v2');
    assert.equal(conn.text, '');
    await proxy.set('l0', { mode: 'delay', ms: 0, direction: 'up' }); // any change ends the hold
    assert.equal(await conn.waitFor('+OK\r\n'), '+OK\r\n');
    conn.sock.destroy();
  });

  it('resets open connections and every new one until healed', T, async () => {
    const proxy = await proxyTo(redis.address);
    const conn = await Conn.open(proxy.address('l0'));
    conn.send(resp('PING'));
    await conn.waitFor('+PONG\r\n');
    await proxy.set('l0', { mode: 'reset' });
    assert.deepEqual(await conn.closed, { error: 'ECONNRESET', ended: false, text: '+PONG\r\n' });
    for (let i = 0; i < 2; i++) {
      const again = await Conn.open(proxy.address('l0'));
      again.send(resp('PING'));
      const closed = await again.closed;
      assert.equal(closed.text, '');
      assert.equal(closed.ended, false);
      assert.ok([null, 'ECONNRESET', 'EPIPE'].includes(closed.error), closed.error);
    }
    assert.equal((await proxy.stats('l0'))['l0'].connections, 3);
    await proxy.set('l0', { mode: 'pass' });
    assert.equal(await redisCommand(portOf(proxy.address('l0')), ['PING']), 'PONG');
  });

  it('closes the client when the master is killed or cannot be reached', T, async () => {
    const victim = cluster.master(1);
    const proxy = await proxyTo(victim.address);
    const conn = await Conn.open(proxy.address('l0'));
    conn.send(resp('PING'));
    await conn.waitFor('+PONG\r\n');
    await victim.kill();
    const closed = await conn.closed;
    assert.equal(closed.text, '+PONG\r\n');
    const refused = await Conn.open(proxy.address('l0')); // nothing listens there now
    assert.equal((await refused.closed).text, '');
    await waitUntil(async () => (await proxy.stats('l0'))['l0'].open === 0,
      { ...WAIT, what: 'no open connection' });
  });

  it('closes the master side when the client closes, after what was held', T, async () => {
    const server = await plainServer();
    const proxy = await proxyTo(server.address);
    await proxy.set('l0', { mode: 'hold', direction: 'up' });
    const conn = await Conn.open(proxy.address('l0'));
    conn.send('last words');
    await queued(proxy, 'l0', 'queuedUp', 10);
    conn.sock.destroy();
    await conn.closed;
    const upstream = await server.next();
    assert.equal(upstream.ended, false);
    await proxy.set('l0', { mode: 'pass' });
    assert.deepEqual(await upstream.closed, { error: null, ended: true, text: 'last words' });
    await server.close();
  });

  it('rejects pending and later calls when the child dies', T, async () => {
    const proxy = await proxyTo(`127.0.0.1:${await freePort()}`);
    proxy.child.kill('SIGSTOP'); // the call below stays pending
    const pending = proxy.stats();
    proxy.child.kill('SIGKILL');
    await assert.rejects(pending,
      /fault proxy stats: fault proxy child \(pid \d+\) exited unexpectedly \(signal SIGKILL\)/);
    await assert.rejects(proxy.set('l0', { mode: 'pass' }), /exited unexpectedly/);
    await proxy.stop();
    assert.ok(fs.existsSync(proxy.logPath));
  });

  it('stop() kills a child that does not answer', T, async () => {
    const proxy = await proxyTo(`127.0.0.1:${await freePort()}`);
    proxy.child.kill('SIGSTOP');
    await proxy.stop();
    assert.equal(proxy.child.signalCode, 'SIGKILL');
  });
});
