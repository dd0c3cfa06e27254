// The checks of the election workload (candidate.mjs), over the run's history (pure, no I/O):
//   h.leaders:  one record per term a candidate was told it won: {client, agent, name, value,
//               token, term, t_requested, t_granted, validity_end (after its extends), t_exit,
//               ended, resign, extends: [{t_sent, ok, validity_ms, error}]}
//   h.observed: the observers' answers: {client, seq (one per connection), agent, name, kind
//               ("observe" reply, pushed "event", "read" = a `leader` reply), t_sent (not for
//               events), t_received, term, value, leader (whether one was named), missed, error}
// A leader's window is a mutex hold's (windows.mjs windowEnd): [t_granted, min(t_exit,
// validity_end)], the validity counted from t_requested + waited_ms − 1 ms and, after an
// extend, from when the extend was sent. A window that ended before it began (the reply came
// after its validity) is a leader that never led: it counts for nothing but its term.

import { EXCLUSION, ORDER } from './verdicts.mjs';
import { groupBy, ms, sec, sweepOverlaps, windowEnd } from './windows.mjs';

// Violation tags (analysis.mjs): two leaders at once breaks the election's exclusion; a term out
// of order, or an observer answered an older term, breaks its order (terms are its fences).
const exclusion = (t) => ({ t, kinds: ['election'], property: EXCLUSION });
const order = (t) => ({ t, kinds: ['election'], property: ORDER });

const leads = (l) => windowEnd(l) > l.t_granted;
const who = (h, l) => `${l.client}@${l.agent} term ${l.term} [${sec(h, l.t_granted)} s, ` +
  `${sec(h, windowEnd(l))} s]`;

function countBy(items, key) {
  const counts = new Map();
  for (const item of items) counts.set(key(item), (counts.get(key(item)) || 0) + 1);
  return [...counts].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => `${k} ${v}`).join(', ');
}

// (8) Elections. (a) Never two leaders of one name whose windows overlap. (b) Terms strictly
// increase: a leader never has a term <= that of a leader whose window ended before its own
// began, and no two terms of a name are one (every term is a fenced grant's fence).
export function checkElections(h) {
  const violations = [];
  const parts = [];
  const all = h.leaders ?? [];
  for (const [name, terms] of groupBy(all, (l) => l.name)) {
    const led = terms.filter(leads);
    sweepOverlaps(led, (l, reach) => violations.push({ kind: 'two-leaders', ...exclusion(l.t_granted),
      text: `${name}: ${who(h, l)} elected while ${who(h, reach)} led ` +
        `(overlap ${ms(Math.min(windowEnd(reach), windowEnd(l)) - l.t_granted).toFixed(1)} ms)`,
      a: reach, b: l }));
    const byTerm = new Map();
    for (const l of terms) {
      const other = byTerm.get(l.term);
      if (other && other.token !== l.token) {
        violations.push({ kind: 'same-term', ...order(l.t_granted), text: `${name}: ${who(h, l)} and ${who(h, other)} ` +
          'were both elected with that term', a: other, b: l });
      }
      byTerm.set(l.term, l);
    }
    // In start order, against the highest term of the windows that ended by then.
    const ends = [...led].sort((a, b) => windowEnd(a) - windowEnd(b));
    let j = 0;
    let before = null;
    for (const l of [...led].sort((a, b) => a.t_granted - b.t_granted)) {
      for (; j < ends.length && windowEnd(ends[j]) <= l.t_granted; j++) {
        if (!before || ends[j].term > before.term) before = ends[j];
      }
      if (before && l.term <= before.term) {
        violations.push({ kind: 'term-order', ...order(l.t_granted), text: `${name}: ${who(h, l)} elected after ` +
          `${who(h, before)} had ended`, a: before, b: l });
      }
    }
    const extended = terms.reduce((n, l) => n + l.extends.filter((e) => e.ok).length, 0);
    const range = led.length ? `terms ${Math.min(...led.map((l) => l.term))}..` +
      `${Math.max(...led.map((l) => l.term))}` : 'no terms';
    parts.push(`${name}: ${terms.length} leaders (${range}, ` +
      `${terms.length - led.length} elected past their validity), ${extended} extends; ended ` +
      `${countBy(terms, (l) => l.ended)}; resign ${countBy(terms, (l) => l.resign)}`);
  }
  return { id: 8, title: 'never two leaders at once; terms increase from leader to leader',
    violations, stats: parts.join('; ') || 'no leaders' };
}

// Every term any answer or grant showed, by name, in the order it became known: [{t, term}],
// with the highest term known up to each point.
function knownTerms(h, name) {
  const points = [
    ...(h.leaders ?? []).filter((l) => l.name === name).map((l) => ({ t: l.t_granted, term: l.term })),
    ...(h.observed ?? []).filter((o) => o.name === name && o.leader && Number.isSafeInteger(o.term))
      .map((o) => ({ t: o.t_received, term: o.term })),
  ].sort((a, b) => a.t - b.t);
  let high = -Infinity;
  for (const p of points) p.high = high = Math.max(high, p.term);
  return points;
}

// The highest term known strictly before t (-Infinity: none).
function highestBefore(points, t) {
  let lo = 0;
  let hi = points.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (points[mid].t < t) lo = mid + 1;
    else hi = mid;
  }
  return lo === 0 ? -Infinity : points[lo - 1].high;
}

// (9) What observers see. (a) Per observer connection and name, the terms it is answered
// (its observe reply, then its events in arrival order) never go down. (b) A leader named with
// a term is the candidate elected with that term (its value), when that candidate's record is
// there. (c) A `leader` read or observe reply never names a term below one that was known to
// be elected (a grant received, or any answer received) before it was sent: that term's grant
// took the hold from every master of its fence quorum, so an older record is readable on too
// few masters to be answered.
export function checkObservers(h) {
  const violations = [];
  const observed = h.observed ?? [];
  const byTerm = new Map((h.leaders ?? []).map((l) => [`${l.name}\u0000${l.term}`, l]));
  for (const [key, answers] of groupBy(observed.filter((o) => o.kind !== 'read' && !o.error),
    (o) => `${o.seq}\u0000${o.name}`)) {
    let high = null;
    for (const o of answers) {
      if (!Number.isSafeInteger(o.term)) continue;
      if (high && o.term < high.term) {
        violations.push({ kind: 'event-order', ...order(o.t_received), text: `${key.replace('\u0000', ' ')}: ${o.kind} ` +
          `term ${o.term} at ${sec(h, o.t_received)} s after term ${high.term} ` +
          `(${high.kind} at ${sec(h, high.t_received)} s)` });
      }
      if (!high || o.term > high.term) high = o;
    }
  }
  const known = new Map();
  for (const o of observed) {
    if (o.error || !o.leader) continue;
    const elected = byTerm.get(`${o.name}\u0000${o.term}`);
    if (elected && elected.value !== o.value) {
      violations.push({ kind: 'wrong-leader', ...order(o.t_received), text: `${o.name}: ${o.seq} ${o.kind} at ` +
        `${sec(h, o.t_received)} s named ${JSON.stringify(o.value)} with term ${o.term}, which ` +
        `${who(h, elected)} won as ${JSON.stringify(elected.value)}` });
    }
    if (o.kind === 'event') continue;
    if (!known.has(o.name)) known.set(o.name, knownTerms(h, o.name));
    const high = highestBefore(known.get(o.name), o.t_sent);
    if (o.term < high) {
      violations.push({ kind: 'stale-read', ...order(o.t_sent), text: `${o.name}: ${o.seq} ${o.kind} sent at ` +
        `${sec(h, o.t_sent)} s named term ${o.term}; term ${high} was known elected before` });
    }
  }
  const reads = observed.filter((o) => o.kind === 'read');
  const events = observed.filter((o) => o.kind === 'event');
  const answer = (o) => (o.error ?? (o.leader ? 'leader' : 'none'));
  return { id: 9, title: 'observers see terms in order, the elected leader, nothing older',
    violations,
    stats: `${new Set(observed.map((o) => o.seq)).size} observer connections; reads: ` +
      `${countBy(reads, answer) || 'none'}; events: ${events.length} ` +
      `(${events.filter((e) => e.missed).length} missed)` };
}
