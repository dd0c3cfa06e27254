// What each lock kind keeps under each fault, as docs/proof.md's table states it, and how a run
// compares with it (pure, no I/O). The table there and VERDICTS here must agree line by line
// (verdicts.test.mjs compares them).
//
// Every violation a check reports names the kinds whose guarantee it breaks and which property
// (analysis.mjs): EXCLUSION (two holders at once: windows overlap) or ORDER (fences or terms out
// of order, an acknowledged write lost, a stale write let through). A violation is charged to the
// fault in whose reach it happened (from its start to max_ttl + 1 s after its heal: no key set
// before the heal outlives that), or to no fault. It is expected when, for each of its kinds, the
// verdict of that fault allows it:
//   safe              nothing;
//   safe with fences  EXCLUSION (two holders may overlap, but fences keep their order, so a
//                     resource that checks them is protected);
//   not safe          anything.
// Outside every fault, every kind is safe. A violation with no property (a malformed grant, a
// fault not injected, no progress) is never expected.

import { groupBy, ms, windowEnd } from './windows.mjs';

export const EXCLUSION = 'exclusion';
export const ORDER = 'order';
export const SAFE = 'safe';
export const FENCES = 'safe with fences';
export const UNSAFE = 'not safe';

export const KINDS = ['mutex', 'fenced mutex', 'semaphore', 'read-write', 'election', 'detached lease'];

// The kinds an exclusion breach between the register clients' (fenced) grants breaks: the fenced
// mutex's, and the detached lease's too when one of them is a lease (a fenced one: both
// verdicts must allow it).
export const exclusiveKinds = (...grants) =>
  (grants.some((g) => g.detached) ? ['fenced mutex', 'detached lease'] : ['fenced mutex']);

// The resources of the plain mutex's hold clients (checker.mjs holdKinds), whose holds check 7
// judges as a mutex's, not a read-write lock's.
export const mutexResources = (h) =>
  new Set((h.cfg.holdKinds ?? []).filter((k) => k.kind === 'mutex')
    .flatMap((k) => k.resources ?? [k.resource]));

const allSafe = Object.fromEntries(KINDS.map((k) => [k, SAFE]));
// A clock jump forward on a master expires its keys early: a holder left with fewer than a
// quorum of keys can be joined by another. On one master, a plain holder with a bare quorum
// (3 of 5); a fenced holder or a leader (granted on 4 of 5, renewed on at least 3) keeps 2 or
// more, and a rival needs 4 free masters. On three masters, any plain holder, and a fenced one
// left with at most one key; fences and terms stay in order (their counters have no ttl).
const clockJumpOne = { mutex: UNSAFE, 'fenced mutex': SAFE, semaphore: UNSAFE,
  'read-write': UNSAFE, election: SAFE, 'detached lease': UNSAFE };
const clockJumpThree = { ...clockJumpOne, 'fenced mutex': FENCES, election: FENCES };

// By fault name (faults.mjs).
export const VERDICTS = {
  'kill -9 one master': allSafe,
  'kill -9 two masters': allSafe,
  'SIGSTOP one master': allSafe,
  'SIGSTOP one client': allSafe,
  'kill -9 one agent': allSafe,
  'kill -9 agent + resume': allSafe,
  'upgrade under load': allSafe,
  'SIGSTOP holders': allSafe,
  'clock jump, one master': clockJumpOne,
  'clock jump, 3 masters': clockJumpThree,
  'delay > node timeout': allSafe,
  'delay > ttl': allSafe,
  'blackhole one master': allSafe,
  'replies lost, 2 masters': allSafe,
  'reset one master': allSafe,
  'partition one agent': allSafe,
  'SIGSTOP one agent': allSafe,
};

export const verdictOf = (faultName, kind) => (VERDICTS[faultName] ?? allSafe)[kind];

const allows = (verdict, property) =>
  verdict === UNSAFE || (verdict === FENCES && property === EXCLUSION);

// The fault a time falls in the reach of (the latest to start), or null.
function faultAt(h, t) {
  if (t === null || t === undefined) return null;
  const reachUs = (h.cfg.maxTtlMs + 1000) * 1000;
  let found = null;
  for (const f of h.faults) {
    if (!f.error && f.start <= t && t <= f.heal + reachUs) found = f;
  }
  return found;
}

// Marks each violation of each check: v.fault (the fault's index in h.faults, or null) and
// v.expected (true when that fault's verdicts allow it). Returns the unexpected count.
export function judge(h, checks) {
  let unexpected = 0;
  for (const c of checks) {
    for (const v of c.violations) {
      const f = faultAt(h, v.t);
      v.fault = f ? h.faults.indexOf(f) : null;
      v.expected = Boolean(v.property && v.kinds?.length &&
        v.kinds.every((k) => allows(f ? verdictOf(f.name, k) : SAFE, v.property)));
      if (!v.expected) unexpected++;
    }
  }
  return unexpected;
}

// Each kind's records: grants, holds, leaders (t_granted, windowEnd).
function recordsOf(h, kind) {
  const holds = h.holds ?? [];
  switch (kind) {
    case 'mutex': return holds.filter((g) => mutexResources(h).has(g.resource) && !g.detached);
    case 'fenced mutex': return h.grants.filter((g) => !g.detached);
    case 'semaphore': return holds.filter((g) => g.mode === 'permit');
    case 'read-write':
      return holds.filter((g) => g.mode !== 'permit' && !mutexResources(h).has(g.resource) && !g.detached);
    case 'election': return h.leaders ?? [];
    case 'detached lease': return [...h.grants, ...holds].filter((g) => g.detached);
    default: throw new Error(`unknown kind ${kind}`);
  }
}

// Per fault and kind (f.kinds[kind]): the verdict, how many records were granted in the fault's
// reach, the violations charged to it, and how long after the heal the kind was held again
// (resume_ms: the first grant after the heal; for an election, the first leader in office after
// it, 0 when one led through it; null: none in the run).
export function faultKinds(h, checks) {
  const reachUs = (h.cfg.maxTtlMs + 1000) * 1000;
  const byKind = new Map(KINDS.map((k) => [k, recordsOf(h, k).slice().sort((a, b) => a.t_granted - b.t_granted)]));
  const violations = checks.flatMap((c) => c.violations);
  h.faults.forEach((f, i) => {
    f.kinds = {};
    for (const kind of KINDS) {
      const recs = byKind.get(kind);
      const grants = recs.filter((g) => g.t_granted >= f.start && g.t_granted <= f.heal + reachUs).length;
      const mine = violations.filter((v) => v.fault === i && v.kinds?.includes(kind));
      let resume = null;
      for (const g of recs) {
        if (kind === 'election' ? windowEnd(g) > Math.max(g.t_granted, f.heal) : g.t_granted >= f.heal) {
          resume = Math.max(0, ms(g.t_granted - f.heal));
          break;
        }
      }
      f.kinds[kind] = { verdict: verdictOf(f.name, kind), grants, violations: mine.length,
        unexpected: mine.filter((v) => !v.expected).length, resume_ms: recs.length ? resume : null };
    }
  });
}

// The fault x kind table over a run, one row per fault name (in the order first injected):
// {name, count, cells: {kind: {verdict, grants, violations, unexpected, slowest_ms, met, healed}}}.
export function faultTable(h) {
  const goalMs = h.cfg.resumeGoalMs ?? h.cfg.maxTtlMs + 1000;
  const rows = [];
  for (const [name, faults] of groupBy(h.faults.filter((f) => f.kinds), (f) => f.name)) {
    const cells = {};
    for (const kind of KINDS) {
      const all = faults.map((f) => f.kinds[kind]);
      const resumed = all.map((c) => c.resume_ms).filter((x) => x !== null);
      cells[kind] = {
        verdict: verdictOf(name, kind),
        grants: all.reduce((n, c) => n + c.grants, 0),
        violations: all.reduce((n, c) => n + c.violations, 0),
        unexpected: all.reduce((n, c) => n + c.unexpected, 0),
        slowest_ms: resumed.length ? Math.max(...resumed) : null,
        met: resumed.filter((x) => x <= goalMs).length,
        healed: faults.length,
      };
    }
    rows.push({ name, count: faults.length, cells });
  }
  return rows;
}
