// The checks of analysis.mjs against made-up histories: a clean one passes, and each kind of
// violation is caught by its check (a checker that cannot fail proves nothing).
//
//   node --test tests/safety/analysis.test.mjs

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { analyze } from './analysis.mjs';

const S = 1e6; // µs

// A grant of resource r by client, granted at t s, valid v s, exiting after hold s, writing
// with its fence (accepted unless said otherwise). Returns [grant record, register ops].
function grant(h, { r = 'r0', client = 'c0', t, v = 1, hold = 0.1, fence, write = 'accepted' }) {
  const token = `tok${h.grants.length}`;
  const g = { type: 'grant', client, agent: 'a0', resource: r, token, fence, t_granted: t * S,
    validity_end: (t + v) * S, t_exit: (t + hold) * S, write };
  h.grants.push(g);
  const s = h.resources[r] || (h.resources[r] = { highest: null, value: 0, accepted: 0 });
  const writeT = (t + hold) * S - 1;
  h.ops.push({ t: t * S + 1, op: 'read', client, resource: r, fence, token, value: s.value });
  const accepted = write === 'accepted';
  h.ops.push({ t: writeT, op: 'write', client, resource: r, fence, token, value: s.value + 1, accepted });
  if (accepted) Object.assign(s, { highest: fence, value: s.value + 1, accepted: s.accepted + 1 });
  return g;
}

function history() {
  return { cfg: { maxTtlMs: 2000 }, t0: 0, grants: [], holds: [], ops: [], resources: {}, faults: [] };
}

// A semaphore or read-write hold (no register): mode "permit" (permit i of K), "shared" or
// "exclusive", granted at t s, valid v s, exiting after hold s.
function hold(h, { r, mode, permit, permits, client = 'c0', agent = 'a0', t, v = 1, hold: held = 0.5 }) {
  const g = { type: 'hold', client, agent, resource: r, mode, token: `hold${h.holds.length}`,
    t_granted: t * S, validity_end: (t + v) * S, t_exit: (t + held) * S };
  if (mode === 'permit') Object.assign(g, { permit, permits });
  h.holds.push(g);
  return g;
}

// A semaphore of 3 permits saturated without excess: three holders at once (one per permit),
// the next granted exactly as one left, and a holder stopped past its validity that stops
// counting at the validity's end, not at its late exit.
function cleanSemaphore() {
  const h = clean();
  hold(h, { r: 's0', mode: 'permit', permits: 3, permit: 0, t: 1, hold: 0.5 });
  hold(h, { r: 's0', mode: 'permit', permits: 3, permit: 1, t: 1.1, client: 'c1', agent: 'a1' });
  hold(h, { r: 's0', mode: 'permit', permits: 3, permit: 2, t: 1.2, client: 'c2', agent: 'a2' });
  hold(h, { r: 's0', mode: 'permit', permits: 3, permit: 0, t: 1.5, client: 'c3' }); // as c0 left
  hold(h, { r: 's0', mode: 'permit', permits: 3, permit: 1, t: 3, v: 1, hold: 9, client: 'c1' });
  hold(h, { r: 's0', mode: 'permit', permits: 3, permit: 1, t: 4.01, client: 'c4' });
  return h;
}

// Readers sharing, a writer alone between them, and a reader stopped past its validity.
function cleanReadWrite() {
  const h = clean();
  hold(h, { r: 'w0', mode: 'shared', t: 1, hold: 0.5 });
  hold(h, { r: 'w0', mode: 'shared', t: 1.2, client: 'c1', agent: 'a1' });
  hold(h, { r: 'w0', mode: 'exclusive', t: 1.8, hold: 0.1, client: 'w0', agent: 'a2' });
  hold(h, { r: 'w0', mode: 'shared', t: 2, v: 0.5, hold: 7, client: 'c2' });
  hold(h, { r: 'w0', mode: 'exclusive', t: 2.5, hold: 0.2, client: 'w1', agent: 'a1' });
  hold(h, { r: 'w0', mode: 'shared', t: 2.7, client: 'c1' });
  return h;
}

// Ten well-behaved grants of r0 and r1, one every second, and a healed fault.
function clean() {
  const h = history();
  for (let i = 0; i < 10; i++) grant(h, { r: `r${i % 2}`, t: i + 1, fence: i + 1 });
  h.faults.push({ name: 'kill -9 one master', target: 'm0', start: 2.5 * S, heal: 2.6 * S });
  return h;
}

// A candidate's term of election e: elected at t s with term, valid v s from then, leaving
// after lead s (the window's end is the earlier of the two).
function leader(h, { name = 'e0', client = 'ld0', agent = 'a0', term, t, v = 1, lead = 0.5,
  value = `${client}#${h.leaders.length + 1}`, extends: ext = [] }) {
  const l = { type: 'leader', client, agent, name, value, token: `lead${h.leaders.length}`, term,
    t_requested: t * S - 1000, t_granted: t * S, validity_end: (t + v) * S, t_exit: (t + lead) * S,
    ended: 'done', resign: 'ok', extends: ext };
  h.leaders.push(l);
  return l;
}

// An observer's answer: a `leader` read (sent at t s, answered 1 ms later), an observe reply or
// a pushed event, naming term and value (or nobody, when value is null).
function seen(h, { kind = 'read', seq = 'ob0/1', name = 'e0', t, term, value }) {
  const o = { type: 'observed', kind, seq, agent: 'a0', name, t_received: t * S + 1000, term,
    value: value ?? null, leader: value !== null && value !== undefined, missed: false };
  if (kind !== 'event') o.t_sent = t * S;
  h.observed.push(o);
  return o;
}

// Leaders of e0 one after the other (one extended, one stopped past its validity: its window
// ends there), one that got its reply after its validity had ended (it never led, and its term
// is older than the leader's before it), and observers that saw them in order.
function cleanElection() {
  const h = clean();
  h.leaders = [];
  h.observed = [];
  leader(h, { term: 1, t: 1, lead: 0.4 });
  leader(h, { term: 2, t: 1.4, v: 1.5, lead: 1.2, client: 'ld1', agent: 'a1',
    extends: [{ t_sent: 2 * S, ok: true, validity_ms: 900 }] });
  leader(h, { term: 4, t: 2.6, v: 1, lead: 9, client: 'ld2', agent: 'a2' }); // stopped until 11.6 s
  const late = leader(h, { term: 3, t: 3.5, v: 0.1, client: 'ld0' });
  late.t_requested = 2.55 * S;
  late.validity_end = 3.4 * S;
  leader(h, { term: 5, t: 3.6, lead: 0.3, client: 'ld1', agent: 'a1' });
  leader(h, { term: 1, t: 1, name: 'e1', client: 'ld3' });
  seen(h, { kind: 'observe', t: 0.5, term: null, value: null });
  seen(h, { kind: 'event', t: 1.01, term: 1, value: 'ld0#1' });
  seen(h, { t: 1.3, term: 1, value: 'ld0#1' });
  seen(h, { kind: 'event', t: 1.41, term: 2, value: 'ld1#2' });
  seen(h, { kind: 'event', t: 2.61, term: 4, value: 'ld2#3', seq: 'ob1/1' });
  seen(h, { t: 3.55, term: 4, value: 'ld2#3' }); // ld2's hold is still renewed while it is stopped
  seen(h, { kind: 'event', t: 3.61, term: 5, value: 'ld1#5' });
  seen(h, { kind: 'read', t: 4.5, term: null, value: null });
  return h;
}

const failing = (h) => analyze(h).filter((c) => c.violations.length).map((c) => c.id);

describe('safety checks', () => {
  it('pass a clean history', () => {
    assert.deepEqual(failing(clean()), []);
  });

  it('(1) catch an accepted fence lower than an earlier one, and a repeated fence', () => {
    const h = clean();
    grant(h, { t: 20, fence: 30 });
    grant(h, { t: 21, fence: 30 }); // the register accepts an equal fence: another grant's
    assert.deepEqual(failing(h), [1]);
    assert.match(analyze(h)[0].violations[0].text, /accepted fence 30/);
  });

  it('(1) catch successive grants whose fences do not increase', () => {
    const h = clean();
    grant(h, { t: 20, fence: 30 });
    grant(h, { t: 21, fence: 29, write: 'rejected', hold: 0.5 }); // rejected while still valid
    assert.deepEqual(failing(h), [1]);
    const kinds = analyze(h)[0].violations.map((v) => v.kind).sort();
    assert.deepEqual(kinds, ['grant-order', 'rejected-while-valid']);
  });

  it('(2) catch two holders in overlapping windows, and a lost update (3)', () => {
    const h = clean();
    const s = h.resources.r0;
    const a = grant(h, { t: 20, fence: 30, hold: 0.5 });
    // b read the same value as a: both were inside the lock at once.
    h.ops.push({ t: 20.2 * S, op: 'read', client: 'c1', resource: 'r0', fence: 31, value: s.value - 1 });
    h.ops.push({ t: 20.3 * S, op: 'write', client: 'c1', resource: 'r0', fence: 31, value: s.value,
      accepted: true });
    h.grants.push({ ...a, client: 'c1', token: 'tokB', fence: 31, t_granted: 20.2 * S,
      t_exit: 20.3 * S });
    s.accepted++;
    s.highest = 31;
    assert.deepEqual(failing(h), [2, 3]);
    assert.match(analyze(h)[1].violations[0].text, /overlap 100\.0 ms/);
  });

  it('(2) end a window at the validity, not at a late exit', () => {
    const h = clean();
    grant(h, { t: 20, v: 1, hold: 5, fence: 30, write: 'rejected' }); // stopped past its validity
    grant(h, { t: 21.5, fence: 31 });
    assert.deepEqual(failing(h).filter((id) => id === 2), []);
  });

  it('(4) catch grants that do not resume within max_ttl + 1 s of a heal', () => {
    const h = clean();
    h.faults.push({ name: 'kill -9 two masters', target: 'm1 m2', start: 10.5 * S, heal: 11 * S });
    h.faults.push({ name: 'SIGSTOP one master', target: 'm3', start: 4.5 * S, heal: 4.6 * S,
      error: 'could not' });
    const c = analyze(h)[3];
    assert.equal(c.violations.length, 2);
    assert.match(c.violations[0].text, /no grant at all/);
    assert.match(c.violations[1].text, /not injected/);
  });

  it('(4) short mode: a slow resume is a figure, only no progress at all fails', () => {
    const h = clean();
    Object.assign(h.cfg, { resumeGoalMs: 3000, resumeFailMs: 30000 });
    // Healed at 2.6 s (clean) and 4.5 s: the next grants at 3 s and 5 s, within the goal. Healed
    // at 10.5 s: the next at 14.3 s (3.8 s, over the goal, within the bound).
    grant(h, { r: 'r1', t: 14.3, fence: 11 });
    h.faults.push({ name: 'SIGSTOP one master', target: 'm3', start: 4 * S, heal: 4.5 * S });
    h.faults.push({ name: 'kill -9 two masters', target: 'm1 m2', start: 10.4 * S, heal: 10.5 * S });
    assert.deepEqual(failing(h), []);
    assert.match(analyze(h)[3].stats, /met after 2 of 3; slowest 3800 ms/);
    // Healed at 15 s, after the last grant: no progress at all.
    h.faults.push({ name: 'kill -9 one agent', target: 'a0', start: 14.5 * S, heal: 15 * S });
    assert.deepEqual(failing(h), [4]);
    assert.match(analyze(h)[3].violations[0].text, /kill -9 one agent .*no grant at all/);
    // The long mode fails on the goal itself.
    h.faults.pop();
    h.cfg.resumeFailMs = 3000;
    assert.deepEqual(failing(h), [4]);
    assert.match(analyze(h)[3].violations[0].text, /the first after 3800 ms/);
  });

  it('(5) catch a late write accepted after a higher fence', () => {
    const h = clean();
    h.ops.push({ t: 30 * S, op: 'write', client: 'c3', resource: 'r0', fence: 4, value: 1, accepted: true });
    h.faults.push({ name: 'SIGSTOP one client', target: 'c3', start: 28 * S, heal: 29.9 * S,
      paused: { client: 'c3', resource: 'r0', fence: 4, write_t: 30 * S, write_accepted: true } });
    // The register itself would have refused it (fence 9 was accepted before): check 1 sees the
    // regression as well, and check 4 that no grant followed the heal.
    assert.deepEqual(failing(h), [1, 4, 5]);
  });

  it('(6) pass a semaphore held by K at once, and count how often it was at K', () => {
    const h = cleanSemaphore();
    assert.deepEqual(failing(h), []);
    assert.match(analyze(h)[5].stats, /s0: K=3, 6 holds, at most 3 at once, 2 granted at K/);
  });

  it('(4) count the semaphore and read-write holds granted during each fault', () => {
    const h = cleanSemaphore();
    h.faults.push({ name: 'kill -9 one agent', target: 'a1', start: 1 * S, heal: 1.3 * S });
    analyze(h);
    assert.deepEqual(h.faults.map((f) => f.holds_during), [0, 3]);
  });

  it('count the holds others were granted while a holder was stopped past its validity', () => {
    const h = cleanSemaphore();
    // c1's permit 1 (granted at 3 s, valid 1 s) stopped until 5 s: c4 took permit 1 at 4.01 s.
    const stopped = h.holds[4];
    h.faults.push({ name: 'SIGSTOP holders', target: 'c1', start: 3.1 * S, heal: 5 * S,
      stopped_holds: [{ client: 'c1', resource: 's0', mode: 'permit', permit: 1,
        token: stopped.token, validity_end: stopped.validity_end, woken: 5 * S, release: 'not_held' }] });
    assert.deepEqual(failing(h), []);
    assert.equal(h.faults[1].stopped_holds[0].taken_meanwhile, 1);
  });

  it('(6) catch a K+1th holder of a semaphore, across agents', () => {
    const h = cleanSemaphore();
    // c3, c1 and c2 hold permits 0, 1 and 2 at 1.55 s: a fourth holder.
    hold(h, { r: 's0', mode: 'permit', permits: 3, permit: 1, t: 1.55, client: 'c5', agent: 'a1' });
    assert.deepEqual(failing(h), [6]);
    const [v, ...more] = analyze(h)[5].violations;
    assert.match(v.text, /s0: c5@a1 permit 1 .* granted while 3 of 3 permits were held/);
    assert.equal(v.open.length, 3);
    assert.deepEqual(more, []);
  });

  it('(6) catch one permit in two holds, a K the others do not share, a permit beyond K', () => {
    const h = cleanSemaphore();
    hold(h, { r: 's0', mode: 'permit', permits: 3, permit: 1, t: 4.2, client: 'c6' });
    hold(h, { r: 's1', mode: 'permit', permits: 2, permit: 0, t: 1 });
    hold(h, { r: 's1', mode: 'permit', permits: 4, permit: 1, t: 1.1 });
    hold(h, { r: 's2', mode: 'permit', permits: 2, permit: 2, t: 1 });
    const texts = analyze(h)[5].violations.map((v) => v.text);
    assert.equal(texts.length, 3);
    assert.match(texts[0], /s0: c6@a0 permit 1 .* permit 1 was held: c4@a0 permit 1/);
    assert.match(texts[1], /s1: .* its K is 4, not 2/);
    assert.match(texts[2], /s2: .* its permit is outside 0\.\.1/);
  });

  it('(7) pass readers sharing and writers alone, and count the readers at once', () => {
    const h = cleanReadWrite();
    assert.deepEqual(failing(h), []);
    assert.match(analyze(h)[6].stats, /w0: 4 shared, 2 exclusive, up to 2 readers at once/);
  });

  it('(7) catch a writer granted while a reader holds, and a reader while a writer holds', () => {
    const h = cleanReadWrite();
    hold(h, { r: 'w0', mode: 'exclusive', t: 2.9, hold: 0.3, client: 'w2', agent: 'a2' }); // c1 reads
    hold(h, { r: 'w0', mode: 'shared', t: 3.6, v: 3, hold: 2, client: 'c7' }); // c1 and w2 gone at 3.2
    hold(h, { r: 'w0', mode: 'exclusive', t: 5, hold: 1 });
    hold(h, { r: 'w0', mode: 'shared', t: 5.5, client: 'c8', agent: 'a1' });
    assert.deepEqual(failing(h), [7]);
    const texts = analyze(h)[6].violations.map((v) => v.text);
    assert.equal(texts.length, 3);
    assert.match(texts[0], /w0: w2@a2 exclusive .* granted while 1 other hold\(s\) were open: c1@a0 shared/);
    assert.match(texts[1], /w0: c0@a0 exclusive .* granted while 1 other hold\(s\) were open: c7@a0 shared/);
    assert.match(texts[2], /w0: c8@a1 shared .* granted while a writer held it: .*c0@a0 exclusive/);
  });

  it('(8) pass leaders one after the other, and (9) observers that saw them in order', () => {
    const h = cleanElection();
    assert.deepEqual(failing(h), []);
    const [elections, observers] = analyze(h).slice(7);
    assert.match(elections.stats, /e0: 5 leaders \(terms 1\.\.5, 1 elected past their validity\), 1 extends/);
    assert.match(observers.stats, /2 observer connections; reads: leader 2, none 1; events: 4/);
  });

  it('(8) catch two leaders at once, across agents', () => {
    const h = cleanElection();
    leader(h, { term: 6, t: 3.8, client: 'ld4', agent: 'a2' }); // ld1 leads 3.6..3.9
    assert.deepEqual(failing(h), [8]);
    const [v, ...more] = analyze(h)[7].violations;
    assert.match(v.text, /e0: ld4@a2 term 6 .* elected while ld1@a1 term 5 .* led \(overlap 100\.0 ms\)/);
    assert.deepEqual(more, []);
  });

  it('(8) catch a term that does not increase, and one term won twice', () => {
    const h = cleanElection();
    leader(h, { term: 5, t: 5, client: 'ld4' }); // after term 5 ended at 3.9 s
    leader(h, { term: 7, t: 7 });
    leader(h, { term: 6, t: 8.5, client: 'ld5' }); // after term 7 ended
    const v = analyze(h)[7].violations;
    assert.deepEqual(v.map((x) => x.kind).sort(), ['same-term', 'term-order', 'term-order']);
    assert.match(v.find((x) => x.kind === 'same-term').text, /ld4@a0 term 5 .* and ld1@a1 term 5/);
  });

  it('(8) a window that ends at its validity: the next leader may come after it', () => {
    const h = cleanElection();
    // ld2 (term 4) was stopped until 11.6 s, but its validity ended at 3.6 s.
    assert.equal(h.leaders[2].t_exit, 11.6 * S);
    assert.deepEqual(failing(h), []);
    h.leaders[2].validity_end = 3.7 * S; // had it been valid until 3.7 s, term 5 overlapped it
    assert.deepEqual(failing(h), [8]);
  });

  it('(9) catch an observer answered a lower term after a higher one', () => {
    const h = cleanElection();
    seen(h, { kind: 'event', t: 3.7, term: 4, value: 'ld2#3' }); // after term 5 on ob0/1
    seen(h, { kind: 'event', t: 3.7, term: 4, value: 'ld2#3', seq: 'ob2/1' }); // a new connection
    assert.deepEqual(failing(h), [9]);
    const v = analyze(h)[8].violations;
    assert.equal(v.length, 1);
    assert.match(v[0].text, /ob0\/1 e0: event term 4 at 3\.701 s after term 5/);
  });

  it('(9) catch a leader named with another candidate\'s term, and a stale read', () => {
    const h = cleanElection();
    seen(h, { kind: 'event', t: 3.62, term: 5, value: 'ld9#9', seq: 'ob1/1' });
    // Term 5 was known at 3.6 s. (Reads are not in the order of check (9a): this is not one.)
    seen(h, { t: 3.7, term: 4, value: 'ld2#3', seq: 'ob1/1' });
    seen(h, { t: 3.59, term: 4, value: 'ld2#3', seq: 'ob3/1' }); // sent before it was known
    const v = analyze(h)[8].violations;
    assert.deepEqual(v.map((x) => x.kind).sort(), ['stale-read', 'wrong-leader']);
    assert.match(v.find((x) => x.kind === 'wrong-leader').text,
      /named "ld9#9" with term 5, which ld1@a1 term 5 .* won as "ld1#5"/);
    assert.match(v.find((x) => x.kind === 'stale-read').text,
      /ob1\/1 read sent at 3\.700 s named term 4; term 5 was known elected before/);
  });

  it('count the terms others won while a leader was stopped past its validity', () => {
    const h = cleanElection();
    const l = h.leaders[2];
    h.faults.push({ name: 'SIGSTOP holders', target: 'ld2', start: 2.7 * S, heal: 11.6 * S,
      stopped_holds: [{ client: 'ld2', resource: 'e0', mode: 'leader', term: 4, token: l.token,
        validity_end: l.validity_end, woken: 11.6 * S, release: 'ok' }] });
    analyze(h);
    assert.equal(h.faults[1].stopped_holds[0].taken_meanwhile, 1);
    assert.equal(h.faults[1].holds_during, 2); // terms 3 and 5
  });

  it('(7) catch two writers at once', () => {
    const h = cleanReadWrite();
    hold(h, { r: 'w0', mode: 'exclusive', t: 2.6, client: 'w3' }); // w1 holds 2.5..2.7
    assert.deepEqual(failing(h), [7]);
    assert.match(analyze(h)[6].violations[0].text, /w3@a0 exclusive .* w1@a1 exclusive/);
  });
});

// The plain mutex m0 contended by four clients (mx0@a0, mx1@a1, mx2@a1, mx3@a2; wait_ms 3 s)
// for 60 s: one hold a second, [k + 0.1, k + 0.9] s, each asked 0.2 s before its grant; mx0
// holds every tenth (k = 5, 15, ...), mx1 and mx2 the others in turn, mx3 none: it asks
// throughout, an acquire timing out every 3 s. No hold in the seconds skip(k) says.
function contendedMutex(skip = () => false) {
  const h = { ...history(), trafficStart: 0, trafficEnd: 60 * S, failed: [],
    roster: ['a0', 'a1', 'a1', 'a2'].map((agent, i) => ({ name: `mx${i}`, agent, kind: 'mutex',
      resources: ['m0'], wait_ms: 3000 })) };
  h.cfg = { maxTtlMs: 2000, waitMs: 3000, holdKinds: [{ kind: 'mutex', resource: 'm0', clients: 4 }] };
  let turn = 0;
  for (let k = 0; k < 60; k++) {
    if (skip(k)) continue;
    const client = k % 10 === 5 ? 'mx0' : `mx${1 + (turn++ % 2)}`;
    const g = hold(h, { r: 'm0', mode: 'exclusive', client, agent: client === 'mx0' ? 'a0' : 'a1',
      t: k + 0.1, v: 1, hold: 0.8 });
    g.t_requested = (k - 0.1) * S;
  }
  for (let t = 0; t < 60; t += 3) {
    h.failed.push({ type: 'failure', client: 'mx3', error: 'timeout', resource: 'm0',
      t_requested: t * S, t: (t + 3) * S });
  }
  return h;
}

const fairness = (h) => analyze(h)[9];

describe('fairness (check 10)', () => {
  it('computes each client\'s share of the fair share and Jain\'s index', () => {
    const [g] = fairness(contendedMutex()).shares;
    assert.equal(g.resource, 'm0');
    assert.equal(g.kind, 'mutex');
    assert.equal(g.grants, 60);
    // 6, 27, 27 and 0 of 60 grants among 4 clients: a fair share is 15.
    assert.deepEqual(g.clients.map((c) => [c.client, c.grants, c.share]),
      [['mx0', 6, 0.4], ['mx1', 27, 1.8], ['mx2', 27, 1.8], ['mx3', 0, 0]]);
    assert.equal(g.min_share, 0);
    assert.equal(g.max_share, 1.8);
    assert.equal(g.jain.toFixed(6), (60 ** 2 / (4 * (6 ** 2 + 27 ** 2 + 27 ** 2))).toFixed(6));
  });

  it('finds a client asking for 48 s while others held the lock, and reports it when told not to fail', () => {
    const h = contendedMutex();
    h.cfg.failOnStarvation = false;
    const c = fairness(h);
    assert.equal(c.violations.length, 0);
    assert.match(c.reportOnly, /--no-fail-on-starvation/);
    assert.equal(c.reported.length, 1);
    const { span } = c.reported[0];
    assert.deepEqual([span.client, span.open, span.others_granted, span.timeouts,
      Math.round(span.starved_ms), span.threshold_ms], ['mx3', true, 60, 20, 48000, 30000]);
    assert.match(c.reported[0].text, /mx3@a2 \(mutex, m0\): no grant from 0\.000 s to the end of the traffic/);
    assert.match(c.stats, /4 clients in 1 groups; lowest Jain's index 0\.602 \(m0 mutex\); 1 client\(s\) starved/);
    // mx0 waited 10 s between grants, but asked only 0.2 s of each: not starved.
    assert.deepEqual(failing(h), []);
    h.cfg.failOnStarvation = true;
    assert.deepEqual(failing(h), [10]);
    assert.equal(fairness(h).reported.length, 0);
    delete h.cfg.failOnStarvation; // by default a starved client fails the run
    assert.deepEqual(failing(h), [10]);
    assert.equal(fairness(h).reportOnly, null);
  });

  it('does not count a fault in which nobody was granted against the client', () => {
    // Two masters down from 10 s to 44 s: no hold in [10 s, 45 s). mx3 goes 60 s without a grant,
    // but others held m0 for only 8 + 12 s of it.
    const h = contendedMutex((k) => k >= 10 && k < 45);
    h.faults.push({ name: 'kill -9 two masters', target: 'm1 m3', start: 10 * S, heal: 44 * S });
    h.cfg.failOnStarvation = true;
    const c = fairness(h);
    assert.equal(c.violations.length, 0);
    assert.equal(Math.round(c.longest.mutex.starved_ms), 20000);
    assert.equal(c.longest.mutex.client, 'mx3');
  });

  it('does not count a fault aimed at the client\'s agent against it', () => {
    // a2 partitioned from 10 s to 40 s: its reach (to 43 s) is left out, others held m0 for
    // 8 + 13.6 s of the rest.
    for (const fault of [{ agents: ['a2'] }, {}]) { // the second: an older record, by its target
      const h = contendedMutex();
      h.faults.push({ name: 'partition one agent', target: 'a2 from m1 m2 m3', start: 10 * S,
        heal: 40 * S, ...fault });
      const c = fairness(h);
      assert.equal(c.reported.length + c.violations.length, 0);
      assert.equal(Math.round(c.longest.mutex.starved_ms), 21600);
    }
  });

  it('without failure records, counts the whole span as asking', () => {
    const h = contendedMutex();
    delete h.failed;
    const [found] = fairness(h).violations;
    assert.equal(found.span.client, 'mx3');
    assert.equal(Math.round(found.span.asked_ms), 60000);
  });

  it('reports the longest wait and the timeouts per kind, over the run and per fault', () => {
    const h = contendedMutex();
    h.holds[20].t_requested = 19 * S; // slot 20, asked 1.1 s before its grant
    h.faults.push({ name: 'SIGSTOP one master', target: 'm2', start: 18 * S, heal: 19 * S });
    const rows = Object.fromEntries(fairness(h).waits.map((r) => [r.row, r.kinds.mutex]));
    const figures = (x) => [Math.round(x.longest_ms), x.timeouts];
    assert.deepEqual(figures(rows['whole run']), [1100, 20]);
    // Waiting at some time in [18 s, 22 s]: the grants of slots 18 to 22, 3 timed-out acquires.
    assert.deepEqual(figures(rows['SIGSTOP one master']), [1100, 3]);
    assert.deepEqual(figures(rows['outside faults']), [200, 17]);
  });
});
