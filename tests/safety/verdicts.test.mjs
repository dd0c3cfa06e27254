// The fault x kind verdicts (verdicts.mjs): docs/proof.md's table says the same, a violation is
// excused only by the verdict of the fault it falls in, and the per-fault figures count what
// they say.
//
//   node --test tests/safety/verdicts.test.mjs

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, it } from 'node:test';

import { repoRoot } from '../browser/fixture.mjs';
import { analyze } from './analysis.mjs';
import { FAULTS } from './faults.mjs';
import { FENCES, KINDS, UNSAFE, VERDICTS, faultTable } from './verdicts.mjs';

const S = 1e6; // µs

// docs/proof.md's table ("What survives which fault"): {fault: {kind: verdict}}, in its order.
function docsTable() {
  const text = fs.readFileSync(`${repoRoot}/docs/proof.md`, 'utf8');
  const lines = text.split('\n');
  const head = lines.findIndex((l) => l.startsWith('| fault | mutex |'));
  assert.ok(head >= 0, 'docs/proof.md has no fault x kind table');
  const columns = lines[head].split('|').slice(2, 2 + KINDS.length).map((c) => c.trim());
  assert.deepEqual(columns, KINDS);
  const table = {};
  for (const l of lines.slice(head + 2)) {
    if (!l.startsWith('|')) break;
    const cells = l.split('|').slice(1, 2 + KINDS.length).map((c) => c.trim());
    table[cells[0]] = Object.fromEntries(KINDS.map((k, i) => [k, cells[i + 1]]));
  }
  return table;
}

// A fenced grant of r0 at t s (valid 1 s, held hold s) and its register read and write.
function grant(h, { t, fence, hold = 0.5, detached = false, accepted = true }) {
  const token = `tok${h.grants.length}`;
  h.grants.push({ client: `c${h.grants.length}`, agent: 'a0', resource: 'r0', token, fence, detached,
    t_granted: t * S, validity_end: (t + 1) * S, t_exit: (t + hold) * S,
    write: accepted ? 'accepted' : 'rejected' });
  h.ops.push({ t: t * S + 1, op: 'read', client: 'c', resource: 'r0', fence, token });
  h.ops.push({ t: (t + hold) * S - 1, op: 'write', client: 'c', resource: 'r0', fence, token, accepted });
  if (accepted) h.resources.r0.value = h.resources.r0.accepted += 1;
}

// Two overlapping grants of r0 at 10 s and 10.2 s (the second's higher fence refuses the
// first's write), during a fault named name (10 s to 10.1 s) unless name is null.
function overlap(name, { detached = false, fences = [1, 2] } = {}) {
  const h = { cfg: { maxTtlMs: 2000 }, t0: 0, grants: [], holds: [], leaders: [], observed: [],
    ops: [], resources: { r0: { value: 0, accepted: 0 } }, faults: [] };
  if (name) h.faults.push({ name, target: 'm0', start: 9.9 * S, heal: 10.1 * S });
  grant(h, { t: 10, fence: fences[0], detached, accepted: fences[0] > fences[1] });
  grant(h, { t: 10.2, fence: fences[1] });
  return h;
}

const judged = (h) => analyze(h).flatMap((c) => c.violations);

describe('fault x kind verdicts', () => {
  it('docs/proof.md states every fault the checker injects, with the same verdicts', () => {
    const docs = docsTable();
    assert.deepEqual(Object.keys(docs), FAULTS.map((f) => f.name));
    assert.deepEqual(Object.keys(VERDICTS), FAULTS.map((f) => f.name));
    for (const [fault, verdicts] of Object.entries(VERDICTS)) assert.deepEqual(docs[fault], verdicts, fault);
  });

  it('excuse two holders at once only under a fault whose verdict allows it', () => {
    const unsafe = judged(overlap('clock jump, 3 masters'));
    assert.ok(unsafe.length >= 2, 'the overlap is found');
    assert.ok(unsafe.every((v) => v.expected && v.fault === 0));
    const safe = judged(overlap('kill -9 one master'));
    assert.ok(safe.length >= 2 && safe.every((v) => !v.expected));
    const none = judged(overlap(null));
    assert.ok(none.length >= 2 && none.every((v) => !v.expected && v.fault === null));
  });

  it('charge a violation to a fault up to max_ttl + 1 s after its heal, no later', () => {
    // Check 2's violation is at the second grant, 10.2 s.
    const second = (h) => judged(h).find((v) => v.text.includes('granted while'));
    const h = overlap('clock jump, 3 masters');
    h.faults[0].heal = 10.2 * S - 3 * S; // reach ends at 10.2 s: the second grant is in it
    h.faults[0].start = 6 * S;
    assert.ok(second(h).expected);
    h.faults[0].heal -= 1; // one µs earlier: outside
    assert.ok(!second(h).expected && second(h).fault === null);
  });

  it('never excuse fences out of order where the verdict is "safe with fences"', () => {
    assert.equal(VERDICTS['clock jump, 3 masters']['fenced mutex'], FENCES);
    // The later grant carries the lower fence and the register accepts it: an order breach,
    // refused even in a clock jump.
    const v = judged(overlap('clock jump, 3 masters', { fences: [2, 1] }));
    assert.ok(v.some((x) => x.property === 'order' && !x.expected), JSON.stringify(v));
  });

  it('excuse two overlapping grants received out of fence order, not successive ones', () => {
    // Granted 10 s with fence 2, received after the one granted at 9.9 s with fence 3 but
    // before that one's window ended: the register refuses the lower fence's write, as it must.
    const h = overlap('clock jump, 3 masters', { fences: [3, 2] });
    h.grants[1].t_granted = 10.05 * S;
    h.grants[1].fence = 2;
    h.grants[0].fence = 3;
    const v = judged(h);
    assert.ok(!v.some((x) => x.kind === 'grant-order'), JSON.stringify(v));
    // The same, once the first grant's window had ended: out of order.
    const late = overlap('clock jump, 3 masters', { fences: [3, 2] });
    late.grants[1].t_granted = 11.5 * S;
    late.grants[1].validity_end = 12.5 * S;
    late.grants[1].t_exit = 12 * S;
    assert.ok(judged(late).some((x) => x.kind === 'grant-order' && !x.expected));
    // A grant received after its validity ended (empty window) ends nothing: a later grant with
    // a lower fence is no breach of order (its agent decided it after the pause, fence higher).
    const empty = overlap(null, { fences: [3, 2] });
    Object.assign(empty.grants[0], { t_granted: 11 * S, validity_end: 10.5 * S, t_exit: 11.1 * S });
    empty.grants[1].t_granted = 10.6 * S;
    assert.ok(!judged(empty).some((x) => x.kind === 'grant-order'), JSON.stringify(judged(empty)));
  });

  it('charge a detached lease\'s overlap to the detached lease column', () => {
    const h = overlap('clock jump, 3 masters', { detached: true });
    const v = judged(h);
    assert.ok(v.length && v.every((x) => x.kinds.includes('detached lease')));
    assert.equal(VERDICTS['clock jump, 3 masters']['detached lease'], UNSAFE);
    const row = faultTable(h)[0];
    assert.equal(row.cells['detached lease'].violations, v.filter((x) => x.kinds.includes('detached lease')).length);
    // A fenced lease is judged by the fenced mutex's verdict too: the stricter one decides.
    const one = judged(overlap('clock jump, one master', { detached: true }));
    assert.ok(one.some((x) => x.property === 'exclusion' && !x.expected));
    assert.equal(row.cells['fenced mutex'].grants, 1); // the detached one is not the mutex's
    assert.equal(row.cells['detached lease'].grants, 1);
  });

  it('measure each kind\'s first grant after the heal', () => {
    const h = overlap('kill -9 one master');
    const row = faultTable((analyze(h), h))[0];
    assert.equal(row.cells['fenced mutex'].slowest_ms, 100); // 10.1 s heal -> 10.2 s grant
    assert.equal(row.cells.semaphore.slowest_ms, null); // no semaphore clients
  });
});
