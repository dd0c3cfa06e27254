// An election process of the safety checker, through one agent: a candidate that campaigns for
// a few names and leads for a while when elected, or an observer that watches who leads.
//
//   node candidate.mjs NAME AGENT_LABEL AGENT_SOCKET REGISTER_SOCKET CONFIG_JSON
//
// CONFIG_JSON: {"role":"candidate"|"observer","names":["e0","e1"],"seed":123, ...}
//   candidate: "ttlMinMs","ttlMaxMs","waitMs" (the campaign's), "actShareMax" (each stretch of
//   work takes up to this share of the validity left), "extendChance" and "maxExtends" (after
//   a stretch, extend by token with this chance, at most that often per term), "dropChance"
//   (end a term by closing the connection instead of resigning), "marginMs" (stop leading
//   with less validity left than this), "idleMaxMs" (a pause after each term).
//   observer: "readMinMs","readMaxMs" (the pause between two `leader` reads).
// seed: every choice (name, ttl, how long to act, extend or not, resign or drop) is drawn from
// it (rng.mjs).
//
// A candidate's term: campaign {name, value, ttl_ms, wait_ms} → elected: term, token,
// validity_ms, waited_ms, and the validity's end counted as a mutex's (client.mjs
// validityEndOf: from t_requested + waited_ms − 1 ms) → tell the register it leads (where
// SIGSTOP one holder may stop it) → act in stretches, each below the validity left, extending
// by token now and then (a fresh validity_ms counted from before the extend was sent) → stop
// when done, when too little validity is left, when an extend fails, or at a `lost` event for
// its token → t_exit → resign by token (or close the connection) → send the record
// (type "leader"). Its window is [t_granted, min(t_exit, validity_end)], as a mutex hold's.
//
// An observer: connect, `observe` every name (the reply is its first answer), then `leader`
// reads of a random name until the connection goes (its agent killed), then again on a new
// connection: each connection is one sequence ("seq"). It sends each answer (type "observed":
// kind "observe", "event" or "read", the term and leader value it named, the times it was
// sent and received).
//
// Times are µs on CLOCK_MONOTONIC, shared with the checker. On a lost agent connection a leader
// resumes its term through the agent's next run while its validity lasts (resumeTerm); otherwise
// both reconnect with backoff and carry on.

import { setTimeout as pause } from 'node:timers/promises';

import { nowUs, resumeThroughNextRun, startClient, validityEndOf } from './process.mjs';

const { name, agentLabel, agentSocket, cfg, random, randInt, checker, agent } =
  await startClient();
const { register, send, stopRequested } = checker;

// The run is wrong, not the election: the agent refused what the protocol allows.
function refused(what, reply) {
  console.error(`${name}: the agent refused ${what}: ${JSON.stringify(reply)}`);
  process.exit(2);
}

// Calls the agent; a lost connection or no reply is {ok: false, error: "disconnected"}.
async function call(conn, request, timeoutMs) {
  try {
    return await conn.call(request, { timeoutMs });
  } catch (err) {
    conn.close();
    return { ok: false, error: 'disconnected', message: err.message };
  }
}

// ---------------------------------------------------------------------------------------------
// Candidate

const isLost = (token) => (e) => e.event === 'lost' && e.token === token;

// Waits ms, or less: resolves "lost" at a `lost` event for token, "closed" when the connection
// goes, "time" otherwise.
function actFor(conn, token, ms) {
  return new Promise((resolve) => {
    const check = () => {
      if (conn.events.some(isLost(token))) finish('lost');
      else if (conn.closed) finish('closed');
    };
    const timer = setTimeout(() => finish('time'), ms);
    const finish = (why) => {
      clearTimeout(timer);
      conn.eventWaiters.delete(check);
      conn.sock.off('close', check);
      resolve(why);
    };
    conn.eventWaiters.add(check);
    conn.sock.on('close', check);
    check();
  });
}

// Leads until done, lapsed, deposed or cut off: returns why it stopped. record.validity_end
// follows successful extends.
async function lead(conn, record) {
  const { token } = record;
  for (;;) {
    const leftMs = (record.validity_end - nowUs()) / 1000 - cfg.marginMs;
    if (leftMs <= 0) return 'lapsed';
    const why = await actFor(conn, token, random() * cfg.actShareMax * leftMs);
    if (why !== 'time') return why;
    if (record.extends.length >= cfg.maxExtends || random() >= cfg.extendChance) return 'done';
    if (record.validity_end - nowUs() < cfg.marginMs * 1000) return 'lapsed';
    const tSent = nowUs();
    const r = await call(conn, { op: 'extend', resource: record.name, token, ttl_ms: record.ttl_ms },
      10000);
    record.extends.push({ t_sent: tSent, t_reply: nowUs(), ok: r.ok, validity_ms: r.validity_ms,
      error: r.error });
    if (!r.ok) {
      if (r.error === 'bad_request') refused('an extend of a leader', r);
      return `extend ${r.error}`;
    }
    // Counted from before the extend was sent: never later than the promise.
    record.validity_end = Math.max(record.validity_end, tSent + r.validity_ms * 1000);
  }
}

// A term whose connection went is resumed through the agent's next run while its validity
// lasts, as the client libraries do ("election": true, its term as the fence; process.mjs
// resumeThroughNextRun). The connection it was resumed on, or null.
async function resumeTerm(record) {
  const ask = { op: 'resume', resource: record.name, token: record.token, ttl_ms: record.ttl_ms,
    renew: true, fence: record.term, election: true };
  const next = await resumeThroughNextRun(agentSocket, agent, ask, record, stopRequested);
  if (record.resume_refused === 'bad_request') refused('the resume of a leadership', record);
  return next;
}

let campaigns = 0;
async function candidateTerm() {
  const conn = await agent.get();
  if (!conn) return;
  const election = cfg.names[randInt(0, cfg.names.length - 1)];
  const ttlMs = randInt(cfg.ttlMinMs, cfg.ttlMaxMs);
  const value = `${name}#${++campaigns}`;
  const tRequested = nowUs();
  const reply = await call(conn, { op: 'campaign', name: election, value, ttl_ms: ttlMs,
    wait_ms: cfg.waitMs }, cfg.waitMs + 5000);
  const tGranted = nowUs();
  if (!reply.ok) {
    send({ type: 'failure', error: `campaign ${reply.error}`, message: reply.message,
      resource: election, t_requested: tRequested, t: tGranted });
    if (reply.error === 'bad_request') refused('a campaign', reply);
    if (reply.error !== 'timeout') await pause(randInt(10, 50));
    return;
  }
  if (reply.name !== election || !Number.isSafeInteger(reply.term) || reply.term < 1 ||
      typeof reply.token !== 'string' || !(reply.validity_ms > 0)) {
    refused('nothing, but elected it with a malformed reply', reply);
  }
  const record = {
    type: 'leader', agent: agentLabel, name: election, value, token: reply.token,
    term: reply.term, ttl_ms: ttlMs, validity_ms: reply.validity_ms, waited_ms: reply.waited_ms,
    t_requested: tRequested, t_granted: tGranted,
    validity_end: validityEndOf(reply, tRequested, tGranted), extends: [],
  };
  // Where the checker may stop us (SIGSTOP one holder): a long timeout, as for client.mjs.
  await register.call({ op: 'holding', client: name, resource: election, token: reply.token,
    validity_end_us: record.validity_end }, { timeoutMs: 120000 });
  let via = conn;
  record.ended = await lead(via, record);
  while (record.ended === 'closed') {
    const next = await resumeTerm(record);
    if (!next) break;
    via = next;
    record.ended = await lead(via, record);
  }
  record.t_exit = nowUs();
  if (via.closed) {
    record.resign = 'disconnected';
  } else if (random() < cfg.dropChance) {
    agent.drop(via); // the agent ends the term with the session
    record.resign = 'dropped';
  } else {
    const r = await call(via, { op: 'resign', name: election, token: reply.token }, 10000);
    if (!r.ok && r.error === 'bad_request') refused('a resign', r);
    record.resign = r.ok ? 'ok' : r.error;
  }
  send(record);
  if (cfg.idleMaxMs > 0) await pause(randInt(0, cfg.idleMaxMs));
}

// ---------------------------------------------------------------------------------------------
// Observer

// What an answer names: {term, value} (null when no leader). An event carries the term at the
// top level too (with or without a leader).
function named(msg) {
  const leader = msg.leader ?? null;
  const term = Number.isSafeInteger(msg.term) ? msg.term : leader ? leader.term : null;
  return { term: term ?? null, value: leader ? leader.value : null, leader: !!leader };
}

let seq = 0;
async function observeConnection() {
  const conn = await agent.get();
  if (!conn) return;
  const mine = `${name}/${++seq}`;
  // Events, stamped as they arrive (the connection's own stamp is the wall clock).
  let seen = 0;
  const onEvent = () => {
    const t = nowUs();
    for (; seen < conn.events.length; seen++) {
      const e = conn.events[seen];
      if (e.event !== 'leader') continue;
      send({ type: 'observed', kind: 'event', seq: mine, agent: agentLabel, name: e.name,
        t_received: t, missed: e.missed === true, ...named(e) });
    }
  };
  for (const election of cfg.names) {
    const tSent = nowUs();
    const r = await call(conn, { op: 'observe', name: election }, 10000);
    const base = { type: 'observed', seq: mine, agent: agentLabel, name: election, t_sent: tSent,
      t_received: nowUs() };
    if (!r.ok) {
      if (r.error === 'bad_request') refused('an observe', r);
      send({ ...base, kind: 'observe', error: r.error });
      agent.drop(conn); // observe anew, on a new connection
      await pause(randInt(50, 200));
      return;
    }
    send({ ...base, kind: 'observe', ...named({ leader: r.leader }) });
  }
  conn.eventWaiters.add(onEvent);
  onEvent();
  while (!conn.closed && !stopRequested()) {
    await pause(randInt(cfg.readMinMs, cfg.readMaxMs));
    const election = cfg.names[randInt(0, cfg.names.length - 1)];
    const tSent = nowUs();
    const r = await call(conn, { op: 'leader', name: election }, 10000);
    const base = { type: 'observed', kind: 'read', seq: mine, agent: agentLabel, name: election,
      t_sent: tSent, t_received: nowUs() };
    if (!r.ok && r.error === 'bad_request') refused('a leader read', r);
    send(r.ok ? { ...base, ...named({ leader: r.leader }) } : { ...base, error: r.error });
  }
  conn.eventWaiters.delete(onEvent);
}

while (!stopRequested()) {
  if (cfg.role === 'observer') await observeConnection();
  else await candidateTerm();
}
agent.close();
checker.leave();
