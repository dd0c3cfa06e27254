// The clock shim (clock_shift.c, clock_shift.mjs) under a real redis-server: it loads where
// libfaketime cannot (Debian's redis-server links jemalloc), TIME and key expiry follow the
// offset file as soon as it is written, the process lives on, and a restarted master keeps it.
//
// Clock comparisons are brackets, not tolerances: Date.now() and redis-server read the same
// kernel wall clock, so a TIME answer lies in [before + offset, after + offset] where before
// and after are Date.now() around the command (+1 ms: Date.now() is truncated to the ms).
//
//   node --test tests/safety/clock_shift.test.mjs     (needs cc and redis-server)

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { RedisCluster, makeTempDir, removeTempDir } from '../browser/fixture.mjs';
import { ClockShift, buildClockShift, clockShiftEnv } from './clock_shift.mjs';

let dir;
let lib;
let shift;
let cluster;

before(async () => {
  dir = makeTempDir('lw-clock-shift-');
  lib = buildClockShift(dir);
  shift = new ClockShift(path.join(dir, 'shift'));
  cluster = await RedisCluster.start(1, { envFor: () => clockShiftEnv(lib, shift.file) });
});

after(async () => {
  await cluster?.stop();
  if (dir) removeTempDir(dir);
});

// Asserts that master's TIME is the host's wall clock + offsetMs.
async function assertTimeShifted(master, offsetMs) {
  const lo = Date.now();
  const [sec, usec] = await master.command(['TIME']);
  const hi = Date.now();
  const t = Number(sec) * 1000 + Number(usec) / 1000;
  assert.ok(t >= lo + offsetMs && t < hi + 1 + offsetMs,
    `TIME ${t} not in [${lo}, ${hi + 1}) + ${offsetMs} ms`);
}

// The shim is in the process (not merely in its environment).
function assertShimLoaded(master) {
  const maps = fs.readFileSync(`/proc/${master.pid}/maps`, 'utf8');
  assert.ok(maps.includes(lib), `${lib} not mapped in redis-server ${master.pid}`);
}

test('redis-server (linked with jemalloc) starts under the shim and answers PING', async () => {
  const master = cluster.master(0);
  assertShimLoaded(master);
  assert.equal(await master.command(['PING']), 'PONG');
});

test('TIME and key expiry follow the offset file; the process lives on', async () => {
  const master = cluster.master(0);
  shift.set(0);
  assert.equal(shift.ms, 0);
  await assertTimeShifted(master, 0);
  assert.equal(await master.command(['SET', 'lw:short', 'v', 'PX', '30000']), 'OK');
  assert.equal(await master.command(['SET', 'lw:keep', 'v']), 'OK');
  assert.ok((await master.command(['PTTL', 'lw:short'])) > 0);

  shift.set(60000);
  assert.equal(shift.ms, 60000);
  await assertTimeShifted(master, 60000);
  assert.equal(await master.command(['PTTL', 'lw:short']), -2); // expired: no such key
  assert.equal(await master.command(['EXISTS', 'lw:short']), 0);
  assert.equal(await master.command(['EXISTS', 'lw:keep']), 1);
  assert.equal(await master.command(['PTTL', 'lw:keep']), -1); // no ttl
  const info = await master.command(['INFO', 'server']);
  assert.equal(Number(/process_id:(\d+)/.exec(info)?.[1]), master.pid);

  shift.set(0);
  await assertTimeShifted(master, 0);
  assert.equal(await master.command(['EXISTS', 'lw:short']), 0); // deleted, not back
  shift.set(-60000);
  assert.equal(shift.ms, -60000);
  await assertTimeShifted(master, -60000);
  shift.set(0);
});

test('a restarted master is under the shim again, at the offset of the moment', async () => {
  const master = cluster.master(0);
  shift.set(5000);
  await master.kill();
  await master.restart();
  assertShimLoaded(master);
  await assertTimeShifted(master, 5000);
  shift.set(0);
  await assertTimeShifted(master, 0);
});

test('a missing offset file means offset 0', async () => {
  const missing = path.join(dir, 'no-such-file');
  const other = await RedisCluster.start(1, { envFor: () => clockShiftEnv(lib, missing) });
  try {
    assertShimLoaded(other.master(0));
    await assertTimeShifted(other.master(0), 0);
    fs.writeFileSync(missing, Buffer.from([0x60, 0xea, 0, 0, 0, 0, 0, 0])); // 60000, too late
    await assertTimeShifted(other.master(0), 0);
  } finally {
    await other.stop();
  }
});
