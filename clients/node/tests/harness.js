'use strict';
// What the test modules share: clients of the live agent at $LOCKWARDEN_SOCKET, the harness's
// control of the masters, and waiting helpers.
//
// Run by tests/integration/clients_test.cc through test.sh, which starts 5 redis-server masters
// and the agent and sets LWTEST_CONTROL=stdio: a test that needs the masters changed writes
// `@@lw <action>` to the harness and reads its answer, a line (clients/README.md#tests). That is
// test.sh's stdout and stdin, which `node --test` does not pass to the process running the
// tests (it reads the child's stdout, and relays it when it sees fit): the tests open them by
// name, $LWTEST_REQUESTS and $LWTEST_ANSWERS (default: this process's own). Without
// LWTEST_CONTROL, those tests are skipped.

const { beforeEach, afterEach, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { setTimeout: sleep } = require('node:timers/promises');
const { Client, LockError } = require('lockwarden');

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

let requests = null; // the file descriptors of the harness's input and answers
let answers = null;
after(() => {
  for (const fd of [requests, answers]) if (fd !== null) fs.closeSync(fd);
});

// Reads one line of the harness's answers. Blocking: the harness answers each request once it
// has acted, and nothing else is to be done meanwhile.
function readAnswer() {
  const bytes = [];
  const byte = Buffer.alloc(1);
  for (;;) {
    if (fs.readSync(answers, byte, 0, 1, null) === 0) return null; // the harness is gone
    if (byte[0] === 0x0a) return Buffer.from(bytes).toString('utf8');
    bytes.push(byte[0]);
  }
}

// Asks the harness to act on the masters; resolves to its answer after "ok ".
async function control(action) {
  if (requests === null) {
    requests = fs.openSync(process.env.LWTEST_REQUESTS || '/dev/stdout', 'w');
    answers = fs.openSync(process.env.LWTEST_ANSWERS || '/dev/stdin', 'r');
  }
  fs.writeSync(requests, `@@lw ${action}\n`); // one write: a whole line among the runner's
  const answer = readAnswer();
  if (!answer || !answer.startsWith('ok')) throw new Error(`harness could not ${action}: ${answer}`);
  return answer.slice(3);
}

async function rejectsWith(promise, code) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof LockError, String(err));
    assert.equal(err.code, code);
    return true;
  });
}

// Two clients, `a` and `b`, connected before each test of the enclosing suite, closed after.
function clientPair() {
  const pair = { a: null, b: null };
  beforeEach(async () => {
    pair.a = await Client.connect();
    pair.b = await Client.connect();
  });
  afterEach(async () => {
    await pair.a.close();
    await pair.b.close();
  });
  return pair;
}

// Resolves once the agent lists a request waiting for `resource` (asked through `client`).
async function waitQueued(client, resource) {
  const deadline = Date.now() + EVENT_MS;
  for (;;) {
    const { locks } = await client.request('locks');
    if (locks.some((l) => l.resource === resource && l.waiters === 1)) return;
    assert.ok(Date.now() < deadline, `nobody queued for ${resource}`);
    await sleep(10);
  }
}

module.exports = {
  CONTROLLED, WAIT_MS, EVENT_MS, HOLD_MS, limit, needsHarness,
  control, rejectsWith, clientPair, waitQueued,
};
