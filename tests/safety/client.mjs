// One client process of the safety checker: contends for a few resources through one agent.
// A register client takes fenced locks and uses each grant to increment the fenced register
// (register.mjs); a hold client takes a semaphore's permit, a read hold or a write hold, holds
// it a while and reports when it held it.
//
//   node client.mjs NAME AGENT_LABEL AGENT_SOCKET REGISTER_SOCKET CONFIG_JSON
//
// CONFIG_JSON: {"resources":["r1",...],"ttlMinMs":1000,"ttlMaxMs":2000,"waitMs":3000,
//               "minValidityLeftMs":100,"holdMaxMs":2,"holdShareMax":0,"seed":123,
//               "acquire":{"permits":3},"idleMaxMs":0}
// seed: this client's seed (rng.mjs), from which every choice it makes (resource, ttl, hold,
// back-off) is drawn.
// acquire: absent for a register client; for a hold client the fields its acquires add:
// {"permits": K} (a semaphore's permit), {"shared": true} (a read hold), {} (a write hold).
// idleMaxMs: a pause of up to that long after each cycle (default none).
// detachShare: the share of exclusive acquires (a register client's, a writer's) made detached
// leases ("detach": true): such a lease is released by token through another connection of this
// process, to this agent or (half the time, when leaseVia names another agent's socket) to
// another agent, and half the time the connection that acquired it is closed right after the grant
// (the lease must outlive it: if it did not, another client would be granted the lock while
// this one still holds it, which checks 2 and 7 see).
// reentrantShare: the share of a hold client's exclusive holds taken twice by one owner
// ("owner", "reentrant": true; docs/safety.md §12): held two acquires deep, released once halfway
// through the hold (the agent must answer depth 1 and keep it held: if it let go, another client
// would be granted the lock while this one still holds it, which the checks see), then again.
// several: a hold client's acquires take that many of its resources at once ("resources", all or
// none, docs/safety.md §13), named in a random order (the agent takes them in its canonical
// one); each grant is a hold record of its own (type "hold", exclusive, `set` the count), so
// checks 2 and 7 judge each resource's exclusion as for single holds.
// The hold (register clients: between read and write): up to holdMaxMs, plus, when
// holdShareMax > 0, up to that share of the validity left (a slow holder, still within its
// lock, when a fault strikes).
//
// A register client's cycle: acquire (fence: true) → t_granted and validity → enough validity
// left? → register read → (hold) → register write value+1 → t_exit → release → send the record.
// A hold client's: acquire → t_granted and validity → tell the register it holds (where a
// fault may stop it) → hold → t_exit → release → send the record
// (type "hold", with the grant's mode and, for a permit, permits and permit). Times are µs on
// CLOCK_MONOTONIC (process.hrtime.bigint()), shared with the checker. The agent may be killed
// and restarted under us: a hold it took is resumed through its next run (resumeIfGone), and on
// a lost connection the next cycle reconnects with backoff and carries on.

import { setTimeout as pause } from 'node:timers/promises';

import { LockClient } from '../browser/clients.mjs';
import { nowUs, resumeThroughNextRun, startClient, validityEndOf } from './process.mjs';

const { name, agentLabel, agentSocket, cfg, random, randInt, checker, agent } = await startClient();
const { register, send, stopRequested } = checker;

// Second connections, through which detached leases are released (by token): to this agent,
// and to cfg.leaseVia (another agent's socket), which takes the lease over by its token.
const releasers = new Map();
async function releaserConnection(socket) {
  const open = releasers.get(socket);
  if (open && !open.closed) return open;
  try {
    const conn = await LockClient.connect(socket, { timeoutMs: 1000 });
    releasers.set(socket, conn);
    return conn;
  } catch {
    return null;
  }
}

// An exclusive acquire (a register client's, a writer's) may be a detached lease.
const mayDetach = !cfg.acquire || (!('permits' in cfg.acquire) && !cfg.acquire.shared);
// The owner of reentrant holds (any number: one connection, one owner).
const OWNER = 1;

// acquire → {ok, reply, tGranted} or {ok: false, error}
async function acquire(conn, resource, ttlMs, detach, extra = {}) {
  const tRequested = nowUs();
  const kind = { ...(cfg.acquire ?? { fence: true }), ...(detach ? { detach: true } : {}), ...extra };
  try {
    const reply = await conn.call(
      { op: 'acquire', resource, ttl_ms: ttlMs, wait_ms: cfg.waitMs, ...kind },
      { timeoutMs: cfg.waitMs + 5000 },
    );
    const tGranted = nowUs();
    if (!reply.ok) return { ok: false, error: reply.error, message: reply.message, tRequested };
    return { ok: true, reply, tRequested, tGranted };
  } catch (err) {
    // The agent died or did not answer: whatever it may have granted dies with the connection
    // (or with the ttl, if the agent is gone).
    const error = conn.closed ? 'disconnected' : 'no_reply';
    conn.close();
    return { ok: false, error, message: err.message, tRequested };
  }
}

// After its hold, a grant whose connection is gone (the agent was killed, then restarted on the
// same socket) is resumed through the agent's next run (process.mjs resumeThroughNextRun).
// Returns the connection it was resumed on (record updated), or null (the hold was lost).
async function resumeIfGone(conn, resource, ttlMs, record) {
  if (!conn.closed || record.detached) return null;
  const ask = { op: 'resume', resource, token: record.token, ttl_ms: ttlMs };
  if (record.depth) Object.assign(ask, { owner: OWNER, depth: record.depth });
  if (record.mode === 'permit') Object.assign(ask, { permits: record.permits, permit: record.permit });
  if (record.mode === 'shared') ask.shared = true;
  if (Number.isSafeInteger(record.fence)) ask.fence = record.fence;
  return resumeThroughNextRun(agentSocket, agent, ask, record);
}

// The hold: up to holdMaxMs, plus up to holdShareMax of the validity left above the minimum.
async function holdFor(validityEndUs) {
  const left = (validityEndUs - nowUs()) / 1000 - cfg.minValidityLeftMs;
  const holdMs = randInt(0, cfg.holdMaxMs) + Math.max(0, random() * cfg.holdShareMax * left);
  if (holdMs >= 1) await pause(holdMs);
}

// Releases the grant; the record says how the agent answered. A detached lease is released
// through the other connection (its acquiring one may be closed by now).
async function release(conn, resource, token, record) {
  const elsewhere = record.detached && cfg.leaseVia && random() < 0.5;
  const via = record.detached
    ? await releaserConnection(elsewhere ? cfg.leaseVia : agentSocket) : conn;
  try {
    if (!via) throw new Error('no connection');
    const rel = await via.call({ op: 'release', resource, token }, { timeoutMs: 5000 });
    record.release = rel.ok ? 'ok' : rel.error;
  } catch {
    record.release = 'disconnected';
  }
}

// One acquire of a cycle: the grant {reply, tRequested, tGranted, detached}, or null (the
// failure sent). A detached lease's acquiring connection is closed right after the grant half
// the time.
async function acquireOrReport(conn, resource, ttlMs, extra = {}) {
  const detach = !extra.owner && mayDetach && cfg.detachShare > 0 && random() < cfg.detachShare;
  const got = await acquire(conn, resource, ttlMs, detach, extra);
  if (got.ok) {
    got.detached = detach;
    if (detach && random() < 0.5) {
      agent.drop(conn); // the next cycle connects anew
      got.acquiringClosed = true;
    }
    return got;
  }
  await reportFailure(got, resource);
  return null;
}

// A record's detached-lease fields: none for an ordinary hold.
const detachedFields = (got) =>
  (got.detached ? { detached: true, acquiring_closed: !!got.acquiringClosed } : {});

// A reentrant hold's second acquire, and later its first release: the record says what the agent
// answered (depth 2, then depth 1 and still held); anything else of an ok reply is a bug.
async function reenter(conn, resource, ttlMs, record) {
  const tRequested = nowUs();
  const again = await conn.call({ op: 'acquire', resource, ttl_ms: ttlMs, wait_ms: 0,
    owner: OWNER, reentrant: true }, { timeoutMs: 5000 }).catch(() => ({ error: 'disconnected' }));
  const tGranted = nowUs();
  // The first hold lost in between (its agent stopped past its ttl, then its renewal failed):
  // the agent said so (`lost`, written before this reply on the same connection), and the
  // acquire was a new hold of its own: judged as one, and let go of at once.
  const lostFirst = conn.events.some((e) => e.event === 'lost' && e.token === record.token);
  if (again.ok && again.token !== record.token && lostFirst) {
    record.reentered = 'lost';
    const fresh = { type: 'hold', agent: agentLabel, resource, token: again.token,
      mode: 'exclusive', ttl_ms: ttlMs, validity_ms: again.validity_ms, waited_ms: again.waited_ms,
      t_requested: tRequested, t_granted: tGranted,
      validity_end: validityEndOf(again, tRequested, tGranted), t_exit: nowUs() };
    await release(conn, resource, again.token, fresh);
    send(fresh);
    return;
  }
  if (again.ok && (again.token !== record.token || again.depth !== 2)) {
    console.error(`${name}: a reentrant acquire answered ${JSON.stringify(again)}`);
    process.exit(2);
  }
  record.reentered = again.ok ? 'ok' : again.error;
  if (again.ok) record.depth = 2;
}
async function unwind(conn, resource, record) {
  if (record.depth !== 2 || conn.closed) return;
  const rel = await conn.call({ op: 'release', resource, token: record.token },
    { timeoutMs: 5000 }).catch(() => ({ error: 'disconnected' }));
  if (rel.ok && rel.depth !== 1) {
    console.error(`${name}: the first release of a 2-deep hold answered ${JSON.stringify(rel)}`);
    process.exit(2);
  }
  record.unwound = rel.ok ? 'ok' : rel.error;
  if (rel.ok) record.depth = 1;
}

// A hold client's cycle: the grant, the hold, the release, the record of when it was held.
async function holdCycle(conn, resource, ttlMs) {
  const reentrant = mayDetach && cfg.reentrantShare > 0 && random() < cfg.reentrantShare;
  const got = await acquireOrReport(conn, resource, ttlMs,
    reentrant ? { owner: OWNER, reentrant: true } : {});
  if (!got) return;
  const { reply, tRequested, tGranted } = got;
  const validityEndUs = validityEndOf(reply, tRequested, tGranted);
  const record = {
    ...detachedFields(got), type: 'hold', agent: agentLabel, resource, token: reply.token,
    mode: reply.mode ?? 'exclusive', ttl_ms: ttlMs, validity_ms: reply.validity_ms,
    waited_ms: reply.waited_ms, t_requested: tRequested, t_granted: tGranted,
    validity_end: validityEndUs,
  };
  const asked = 'permits' in cfg.acquire ? 'permit' : cfg.acquire.shared ? 'shared' : 'exclusive';
  if (record.mode !== asked) {
    console.error(`${name}: asked for a ${asked} hold, granted ${JSON.stringify(reply)}`);
    process.exit(2);
  }
  if (record.mode === 'permit') Object.assign(record, { permits: cfg.acquire.permits, permit: reply.permit });
  // Where the checker may stop us (SIGSTOP one holder): a long timeout, as for the read.
  await register.call(
    { op: 'holding', client: name, resource, token: reply.token, validity_end_us: validityEndUs },
    { timeoutMs: 120000 },
  );
  if (reentrant) await reenter(conn, resource, ttlMs, record);
  await holdFor(validityEndUs);
  if (reentrant) {
    await unwind(conn, resource, record);
    await holdFor(validityEndUs); // still held, one acquire deep
  }
  const resumed = await resumeIfGone(conn, resource, ttlMs, record);
  if (resumed) await holdFor(record.validity_end);
  record.t_exit = nowUs();
  await release(resumed ?? conn, resource, reply.token, record);
  send(record);
}

// The failure of an acquire, sent; a refusal that no fault explains ends the run.
async function reportFailure(got, resource) {
  send({ type: 'failure', error: got.error, message: got.message, resource,
    t_requested: got.tRequested, t: nowUs() });
  if (got.error === 'bad_request' || got.error === 'kind_mismatch') {
    console.error(`${name}: the agent refused the request (${got.error}): ${got.message}`);
    process.exit(2);
  }
  if (got.error !== 'timeout') await pause(randInt(10, 50));
}

// A set client's cycle: several resources at once, held, released; a record per resource.
async function setCycle(conn, ttlMs) {
  const names = [...cfg.resources];
  for (let i = names.length - 1; i > 0; i--) {
    const j = randInt(0, i);
    [names[i], names[j]] = [names[j], names[i]];
  }
  names.length = cfg.several;
  const tRequested = nowUs();
  let reply;
  try {
    reply = await conn.call({ op: 'acquire', resources: names, ttl_ms: ttlMs, wait_ms: cfg.waitMs },
      { timeoutMs: cfg.waitMs + 5000 });
  } catch (err) {
    const error = conn.closed ? 'disconnected' : 'no_reply';
    conn.close();
    return reportFailure({ error, message: err.message, tRequested }, names.join('+'));
  }
  const tGranted = nowUs();
  if (!reply.ok) return reportFailure({ ...reply, tRequested }, names.join('+'));
  const sorted = [...names].sort();
  if (JSON.stringify(reply.resources.map((g) => g.resource)) !== JSON.stringify(sorted)) {
    console.error(`${name}: asked for ${names}, granted ${JSON.stringify(reply)}`);
    process.exit(2);
  }
  const records = reply.resources.map((g) => ({
    type: 'hold', agent: agentLabel, resource: g.resource, token: g.token, mode: 'exclusive',
    ttl_ms: ttlMs, validity_ms: g.validity_ms, waited_ms: reply.waited_ms, set: names.length,
    t_requested: tRequested, t_granted: tGranted,
    // Each validity is what was left as the reply was written, at the end of the whole wait.
    validity_end: validityEndOf({ validity_ms: g.validity_ms, waited_ms: reply.waited_ms },
      tRequested, tGranted),
  }));
  for (const r of records) {
    await register.call({ op: 'holding', client: name, resource: r.resource, token: r.token,
      validity_end_us: r.validity_end }, { timeoutMs: 120000 });
  }
  await holdFor(Math.min(...records.map((r) => r.validity_end)));
  let via = conn;
  for (const r of records) via = (await resumeIfGone(conn, r.resource, ttlMs, r)) ?? via;
  const tExit = nowUs();
  for (const r of records) {
    r.t_exit = tExit;
    await release(via, r.resource, r.token, r);
    send(r);
  }
}

async function cycle() {
  const conn = await agent.get();
  if (!conn) return;
  const resource = cfg.resources[randInt(0, cfg.resources.length - 1)];
  const ttlMs = randInt(cfg.ttlMinMs, cfg.ttlMaxMs);
  if (cfg.several) {
    await setCycle(conn, ttlMs);
    return;
  }
  if (cfg.acquire) {
    await holdCycle(conn, resource, ttlMs);
    return;
  }
  const got = await acquireOrReport(conn, resource, ttlMs);
  if (!got) return;
  const { reply, tRequested, tGranted } = got;
  const validityEndUs = validityEndOf(reply, tRequested, tGranted);
  const record = {
    ...detachedFields(got), type: 'grant', agent: agentLabel, resource, token: reply.token, fence: reply.fence,
    ttl_ms: ttlMs, validity_ms: reply.validity_ms, waited_ms: reply.waited_ms,
    t_requested: tRequested, t_granted: tGranted, validity_end: validityEndUs,
  };
  if (!Number.isSafeInteger(reply.fence)) {
    console.error(`${name}: a fenced grant without an integer fence: ${JSON.stringify(reply)}`);
    process.exit(2);
  }
  let resumed = null;
  if (validityEndUs - nowUs() < cfg.minValidityLeftMs * 1000) {
    record.write = 'skipped'; // too little validity left to do the work safely
  } else {
    const common = { client: name, resource, fence: reply.fence, token: reply.token };
    // A long timeout: the checker may SIGSTOP us right here, and after SIGCONT the timers run
    // before the reply waiting in the socket is read.
    const read = await register.call(
      { op: 'read', ...common, validity_end_us: validityEndUs },
      { timeoutMs: 120000 },
    );
    record.t_read = nowUs();
    record.read_value = read.value;
    await holdFor(validityEndUs);
    resumed = await resumeIfGone(conn, resource, ttlMs, record);
    record.t_write = nowUs();
    const written = await register.call(
      { op: 'write', ...common, value: read.value + 1 },
      { timeoutMs: 120000 },
    );
    record.write = written.accepted ? 'accepted' : 'rejected';
    record.highest_seen = written.highest;
  }
  record.t_exit = nowUs();
  await release(resumed ?? conn, resource, reply.token, record);
  send(record);
}

while (!stopRequested()) {
  await cycle();
  if (cfg.idleMaxMs > 0) await pause(randInt(0, cfg.idleMaxMs));
}
agent.close();
for (const conn of releasers.values()) conn.close();
checker.leave();
