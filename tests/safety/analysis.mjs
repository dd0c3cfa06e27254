// The checks of the safety run, over its history (pure functions, no I/O):
//   h = {cfg, t0, trafficStart, trafficEnd, grants, holds, ops, resources, failures, faults}
// grants: the fenced-register clients' records (client.mjs); holds: the semaphore and
// read-write clients' records (mode "permit" with permits and permit, "shared" or "exclusive");
// ops: the register's log (register.mjs); leaders: the candidates' terms and observed: the
// observers' answers (candidate.mjs, checked in elections.mjs); roster and failed: the
// contending clients and their failed acquires (fairness.mjs, check 10); every time is µs on
// CLOCK_MONOTONIC. Each check returns {id, title, stats, violations: [{text, t, kinds, property,
// ...}]}: t is when it happened (µs; null: the whole run), kinds the lock kinds whose guarantee it
// breaks and property which one (verdicts.mjs: EXCLUSION or ORDER; none: never excused by a
// fault). A check may also return lines (figures printed under it) and, when what it finds does
// not fail the run, reportOnly (why not) and reported (the findings, shaped as violations).

import { checkElections, checkObservers } from './elections.mjs';
import { checkFairness } from './fairness.mjs';
import {
  EXCLUSION, ORDER, exclusiveKinds, faultKinds, judge, mutexResources,
} from './verdicts.mjs';
import { groupBy, lowerBound, ms, sec, sweepOverlaps, windowEnd } from './windows.mjs';

const who = (h, g) =>
  `${g.client}@${g.agent} fence ${g.fence} [${sec(h, g.t_granted)} s, ${sec(h, windowEnd(g))} s]`;

// (1) Fences. (a) The register accepted writes whose fences strictly increase per resource: an
// equal fence only from the same grant. (b) A grant of a resource carries a fence above those of
// every grant whose window ended before it was granted, and no two grants carry one fence.
// (c) No write was rejected while its grant was still valid: that would mean a higher fence was
// accepted during its validity.
export function checkFences(h) {
  const violations = [];
  const byToken = new Map(h.grants.map((g) => [g.token, g]));
  const last = new Map();
  let acceptedWrites = 0;
  for (const op of h.ops) {
    if (op.op !== 'write') continue;
    if (op.accepted) {
      acceptedWrites++;
      const prev = last.get(op.resource);
      if (prev && (op.fence < prev.fence || (op.fence === prev.fence && op.token !== prev.token))) {
        violations.push({ kind: 'accepted-order', t: op.t, kinds: ['fenced mutex'], property: ORDER, text: `${op.resource}: accepted fence ${op.fence} ` +
          `(${op.client}, t=${sec(h, op.t)} s) after fence ${prev.fence} (${prev.client}, t=${sec(h, prev.t)} s)` });
      }
      last.set(op.resource, op);
      continue;
    }
    const g = byToken.get(op.token);
    if (g && op.t < g.validity_end) {
      violations.push({ kind: 'rejected-while-valid', t: op.t, kinds: exclusiveKinds(g),
        property: EXCLUSION, text: `${op.resource}: write of ${who(h, g)} ` +
        `rejected at ${sec(h, op.t)} s, ${ms(g.validity_end - op.t).toFixed(1)} ms before its validity ended` });
    }
  }
  // (b) Against the grants whose windows had ended before it was granted: two grants that
  // overlap (where a fault allows it) promise nothing about their order, only distinct fences.
  // A grant received after its validity (an empty window: its agent was paused before writing
  // it) held nothing and ends nothing: it was granted at the masters later than its window says.
  for (const [resource, grants] of groupBy(h.grants, (g) => g.resource)) {
    grants.sort((a, b) => a.t_granted - b.t_granted);
    const ends = grants.filter((g) => windowEnd(g) > g.t_granted)
      .sort((a, b) => windowEnd(a) - windowEnd(b));
    const byFence = new Map();
    let j = 0;
    let before = null;
    for (const g of grants) {
      for (; j < ends.length && windowEnd(ends[j]) <= g.t_granted; j++) {
        if (!before || ends[j].fence > before.fence) before = ends[j];
      }
      const same = byFence.get(g.fence);
      const prev = before && g.fence <= before.fence ? before : same;
      if (prev && prev.token !== g.token) {
        violations.push({ kind: 'grant-order', t: g.t_granted, kinds: ['fenced mutex'],
          property: ORDER, text: `${resource}: ${who(h, g)} granted after ${who(h, prev)}` });
      }
      byFence.set(g.fence, g);
    }
  }
  return { id: 1, title: 'accepted fences strictly increase per resource', violations,
    stats: `${acceptedWrites} accepted writes, ${h.grants.length} grants` };
}

// (2) Mutual exclusion: no two grants of a resource have overlapping windows
// [t_granted, min(t_exit, t_granted + validity)]. Sweep in grant order, keeping the grant whose
// window reaches furthest.
export function checkExclusion(h) {
  const violations = [];
  for (const [resource, grants] of groupBy(h.grants, (g) => g.resource)) {
    sweepOverlaps(grants, (g, reach) => violations.push({
      t: g.t_granted, kinds: exclusiveKinds(g, reach), property: EXCLUSION, text: `${resource}: ${who(h, g)} granted while ${who(h, reach)} held it ` +
        `(overlap ${ms(Math.min(windowEnd(reach), windowEnd(g)) - g.t_granted).toFixed(1)} ms)`,
      a: reach, b: g }));
  }
  return { id: 2, title: 'no overlapping validity windows per resource', violations,
    stats: `${h.grants.length} windows` };
}

// (3) No acknowledged write lost: every write the register acknowledged incremented the value
// it read, so the final value is the number of acknowledged writes, counted both by the
// register and by the clients. A lost update (two holders reading the same value) shows here.
export function checkLostWrites(h) {
  const violations = [];
  const acked = new Map();
  for (const g of h.grants) if (g.write === 'accepted') acked.set(g.resource, (acked.get(g.resource) || 0) + 1);
  const parts = [];
  for (const [resource, s] of Object.entries(h.resources)) {
    const byClients = acked.get(resource) || 0;
    parts.push(`${resource}=${s.value}`);
    if (s.value !== s.accepted || s.value !== byClients) {
      violations.push({ t: null, kinds: ['fenced mutex'], property: ORDER,
        text: `${resource}: final value ${s.value}, writes acknowledged ` +
        `${s.accepted} (register) / ${byClients} (clients): ${s.accepted - s.value} lost` });
    }
  }
  return { id: 3, title: 'no acknowledged write lost', violations, stats: `final values ${parts.join(' ')}` };
}

// (4) Liveness after faults: the first grant (any resource, any agent) after each fault healed.
// Its delay is a figure, reported against the goal (cfg.resumeGoalMs, max_ttl + 1 s): how fast
// depends on the machine's load. A violation is a fault not injected as planned, or no grant
// within cfg.resumeFailMs of a heal: the goal itself in long mode, ten times it in the gating
// short mode (no progress at all). Fills fault.resume_ms, fault.grants_during and
// fault.holds_during (semaphore and read-write holds, and leaders, granted between the start and
// the heal).
export function checkResume(h) {
  const violations = [];
  const times = h.grants.map((g) => g.t_granted).sort((a, b) => a - b);
  const holdTimes = [...(h.holds ?? []), ...(h.leaders ?? [])].map((g) => g.t_granted)
    .sort((a, b) => a - b);
  const goalMs = h.cfg.resumeGoalMs ?? h.cfg.maxTtlMs + 1000;
  const failMs = h.cfg.resumeFailMs ?? goalMs;
  let met = 0;
  let slowest = null;
  for (const f of h.faults) {
    f.grants_during = lowerBound(times, f.heal) - lowerBound(times, f.start);
    f.holds_during = lowerBound(holdTimes, f.heal) - lowerBound(holdTimes, f.start);
    const next = times[lowerBound(times, f.heal)];
    f.resume_ms = next === undefined ? null : ms(next - f.heal);
    if (f.error) {
      violations.push({ text: `${f.name}: not injected as planned: ${f.error}` });
      continue;
    }
    if (f.resume_ms !== null) slowest = Math.max(slowest ?? 0, f.resume_ms);
    if (f.resume_ms !== null && f.resume_ms <= goalMs) met++;
    if (f.resume_ms === null || f.resume_ms > failMs) {
      const got = f.resume_ms === null ? 'no grant at all' : `the first after ${f.resume_ms.toFixed(0)} ms`;
      violations.push({ text: `${f.name} (${f.target}) healed at ${sec(h, f.heal)} s: ${got}` });
    }
  }
  const injected = h.faults.filter((f) => !f.error).length;
  const bound = failMs === goalMs ? `within the goal, ${goalMs} ms` : `within ${failMs} ms`;
  return { id: 4, title: `grants resume after each heal (${bound})`, violations,
    stats: `${h.faults.length} faults; goal max_ttl + 1 s (${goalMs} ms) met after ${met} of ` +
      `${injected}; slowest ${slowest === null ? 'none' : `${slowest.toFixed(0)} ms`}` };
}

// (5) The client stopped past its validity: its late write must be rejected whenever a higher
// fence was accepted for its resource meanwhile ("exercised").
export function checkStaleWrites(h) {
  const violations = [];
  let paused = 0;
  let exercised = 0;
  let rejected = 0;
  for (const f of h.faults) {
    if (!f.paused) continue;
    paused++;
    const p = f.paused;
    const higher = h.ops.filter((op) => op.op === 'write' && op.accepted && op.resource === p.resource &&
      op.fence > p.fence && op.t < p.write_t);
    p.higher_accepted_meanwhile = higher.length;
    if (!p.write_accepted) rejected++;
    if (higher.length === 0) continue;
    exercised++;
    if (p.write_accepted) {
      violations.push({ t: p.write_t, kinds: ['fenced mutex'], property: ORDER,
        text: `${p.resource}: late write of ${p.client} (fence ${p.fence}) accepted at ` +
        `${sec(h, p.write_t)} s although fence ${higher.at(-1).fence} was accepted meanwhile` });
    }
  }
  return { id: 5, title: 'a client stopped past its validity has its late write rejected', violations,
    stats: `${paused} paused, ${exercised} with a higher fence accepted meanwhile, ${rejected} rejected` };
}

// Walks the holds of one resource in grant order, each against the holds whose windows are still
// open when it starts (a window that ends exactly when another starts does not overlap it, as in
// check 2). admits(open, g) returns null when g may join the open holds, else why not: a text
// (a malformed grant, never excused by a fault) or {why, kinds} (a breach of those kinds'
// exclusion). Each refusal is a violation {text, t, kinds, property, hold, open}. Also returns
// the most holds open at once.
function sweepHolds(h, resource, holds, admits) {
  const violations = [];
  let open = [];
  let peak = 0;
  for (const g of [...holds].sort((a, b) => a.t_granted - b.t_granted)) {
    open = open.filter((o) => windowEnd(o) > g.t_granted);
    const refusal = admits(open, g);
    if (refusal) {
      const { why, kinds } = typeof refusal === 'string' ? { why: refusal } : refusal;
      const others = open.map((o) => holder(h, o)).join('; ');
      violations.push({ text: `${resource}: ${holder(h, g)} granted while ${why}: ${others}`,
        t: g.t_granted, ...(kinds ? { kinds, property: EXCLUSION } : {}), hold: g, open: [...open] });
    }
    open.push(g);
    peak = Math.max(peak, open.length);
  }
  return { violations, peak };
}

const holder = (h, g) => `${g.client}@${g.agent} ${g.mode}${g.mode === 'permit' ? ` ${g.permit}` : ''} ` +
  `[${sec(h, g.t_granted)} s, ${sec(h, windowEnd(g))} s]`;

// (6) Semaphores: never more than K holds of a resource at once (K = the permits its holders
// asked for), and never one permit in two holds at once (each permit is a mutex). Windows as in
// check 2. "at K" counts the holds granted while K - 1 others held: how often the bound was
// tested at all.
export function checkSemaphore(h) {
  const violations = [];
  const parts = [];
  const holds = (h.holds ?? []).filter((g) => g.mode === 'permit');
  for (const [resource, mine] of groupBy(holds, (g) => g.resource)) {
    const k = mine[0].permits;
    let atK = 0;
    const { violations: v, peak } = sweepHolds(h, resource, mine, (open, g) => {
      if (g.permits !== k) return `its K is ${g.permits}, not ${k} as the others'`;
      if (!(g.permit >= 0 && g.permit < k)) return `its permit is outside 0..${k - 1}`;
      if (open.length === k - 1) atK++;
      const kinds = ['semaphore'];
      if (open.length >= k) return { why: `${open.length} of ${k} permits were held`, kinds };
      if (open.some((o) => o.permit === g.permit)) return { why: `permit ${g.permit} was held`, kinds };
      return null;
    });
    violations.push(...v);
    parts.push(`${resource}: K=${k}, ${mine.length} holds, at most ${peak} at once, ${atK} granted at K`);
  }
  return { id: 6, title: 'at most K holders of a semaphore at once', violations,
    stats: parts.join('; ') || 'no semaphore holds' };
}

// (7) Read-write locks, and the plain mutex (its holds are all exclusive; judged as the mutex
// kind's, verdicts.mjs): an exclusive hold is granted only while no other hold of its resource is
// open, and a shared one only while no exclusive one is. Windows as in check 2.
export function checkReadWrite(h) {
  const violations = [];
  const parts = [];
  const holds = (h.holds ?? []).filter((g) => g.mode === 'shared' || g.mode === 'exclusive');
  for (const [resource, mine] of groupBy(holds, (g) => g.resource)) {
    let readersAtOnce = 0;
    const own = mutexResources(h).has(resource) ? 'mutex' : 'read-write';
    const { violations: v } = sweepHolds(h, resource, mine, (open, g) => {
      const writers = open.filter((o) => o.mode === 'exclusive');
      const kinds = [g.detached || writers.some((o) => o.detached) ? 'detached lease' : own];
      if (g.mode === 'exclusive') {
        return open.length ? { why: `${open.length} other hold(s) were open`, kinds } : null;
      }
      if (!writers.length) readersAtOnce = Math.max(readersAtOnce, open.length + 1);
      return writers.length ? { why: 'a writer held it', kinds } : null;
    });
    violations.push(...v);
    const writes = mine.filter((g) => g.mode === 'exclusive').length;
    parts.push(own === 'mutex' ? `${resource} (mutex): ${writes} holds`
      : `${resource}: ${mine.length - writes} shared, ${writes} exclusive, up to ` +
        `${readersAtOnce} readers at once`);
  }
  return { id: 7, title: 'an exclusive hold excludes every other hold', violations,
    stats: parts.join('; ') || 'no read-write holds' };
}

// For each holder stopped past its validity (fault.stopped_holds): how many holds of its resource
// (terms of its election) other clients were granted after its validity ended and before it was
// let go (taken_meanwhile: whether the fault was exercised). A figure: checks 6, 7 and 8 judge
// those holds.
export function countTakenMeanwhile(h) {
  const all = [...(h.holds ?? []), ...(h.leaders ?? []).map((l) => ({ ...l, resource: l.name }))];
  for (const s of h.faults.flatMap((f) => f.stopped_holds ?? [])) {
    s.taken_meanwhile = all.filter((g) => g.resource === s.resource &&
      g.token !== s.token && g.t_granted >= s.validity_end && g.t_granted < s.woken).length;
  }
}

// Every check over the history; each violation judged against the fault it falls in
// (verdicts.mjs: v.fault, v.expected), and each fault's figures per kind (f.kinds).
export function analyze(h) {
  countTakenMeanwhile(h);
  const checks = [checkFences(h), checkExclusion(h), checkLostWrites(h), checkResume(h),
    checkStaleWrites(h), checkSemaphore(h), checkReadWrite(h), checkElections(h), checkObservers(h),
    checkFairness(h)];
  judge(h, checks);
  faultKinds(h, checks);
  return checks;
}
