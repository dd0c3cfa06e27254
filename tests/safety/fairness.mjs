// (10) Fairness (issue 34): how each contended lock is shared among the clients that ask for it,
// how long each kind waits (over the run and per fault), and which clients starve. Pure, no I/O,
// over the history (analysis.mjs) and two parts of it that only this check reads:
//   h.roster: every client that contends, [{name, agent, kind, resources, wait_ms}] (kind: one of
//     WAIT_KINDS). Absent (an older history): the clients granted something, with the resources
//     they were granted (a client never granted is then missing).
//   h.failed: the failed acquires and campaigns, [{client, resource, error, t_requested, t}] (a
//     failed connect has no resource: nothing was asked). Absent: see starvationOf.
// Every time is µs on CLOCK_MONOTONIC.

import { mutexResources } from './verdicts.mjs';
import { groupBy, lowerBound, ms, sec, windowEnd } from './windows.mjs';

// Whether a starved client fails the run when the run does not say (cfg.failOnStarvation:
// checker.mjs --fail-on-starvation, --no-fail-on-starvation). Exclusive holds take turns across
// agents (docs/safety.md, "Fair turns"), so a starved client is a failure, and the check gates
// the short mode. --no-fail-on-starvation reports starved clients without failing the run (an
// agent run with local_first = true, say, starves remote waiters by design).
export const FAIL_ON_STARVATION = true;
const REPORT_ONLY_WHY = 'starved clients do not fail this run (failOnStarvation false: ' +
  '--no-fail-on-starvation, or a history from before it failed by default)';

// A client starves when, between two of its grants, it spends more than this many times its
// wait_ms asking while others hold what it asks for (issue 34: "no grant for 10 x its wait with
// others granted").
export const STARVATION_WAIT_FACTOR = 10;
const DEFAULT_WAIT_MS = 3000; // the checker's wait_ms, for a history that does not state it

// The kinds a client contends as: the register clients' fenced grants, the plain mutex, a
// semaphore's permits, a read-write lock's readers and writers (apart: a reader waits only for
// writers, a writer for everyone), an election's candidates. The column headers beside them.
export const WAIT_KINDS = ['fenced mutex', 'mutex', 'semaphore', 'read-write shared',
  'read-write exclusive', 'election'];
const HEADERS = ['fenced mutex', 'mutex', 'semaphore', 'rw shared', 'rw exclusive', 'election'];

// Faults aimed at one agent, for histories whose fault records do not name it (f.agents): the
// target's first word is the agent's label.
const AGENT_FAULTS = new Set(['kill -9 one agent', 'kill -9 agent + resume', 'upgrade under load',
  'SIGSTOP one agent', 'partition one agent']);

// Sets of times: sorted, disjoint [from, to] pairs (µs).
function union(intervals) {
  const out = [];
  for (const [a, b] of intervals.filter(([x, y]) => y > x).sort((x, y) => x[0] - y[0])) {
    const last = out.at(-1);
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

// The part of a set inside [from, to].
function clip(set, from, to) {
  const out = [];
  for (let i = lowerBound(set, from, ([, end]) => end); i < set.length && set[i][0] < to; i++) {
    out.push([Math.max(set[i][0], from), Math.min(set[i][1], to)]);
  }
  return out;
}

// A set without the times of another.
function subtract(set, cut) {
  const out = [];
  for (const [a, b] of set) {
    let from = a;
    for (const [c, d] of clip(cut, a, b)) {
      if (c > from) out.push([from, c]);
      from = d;
    }
    if (from < b) out.push([from, b]);
  }
  return out;
}

const measure = (set) => set.reduce((n, [a, b]) => n + (b - a), 0);

// How many of the sorted times fall in [from, to).
const countIn = (sorted, from, to) => lowerBound(sorted, to) - lowerBound(sorted, from);

// Every grant of every kind as an acquire: {client, agent, kind, resource, granted: true, from
// (asked; without t_requested, the grant less waited_ms), to (granted), exit (asking again
// after it: its exit, else its window's end), end (its window's end, check 2's rule)}.
function grantedOf(h) {
  const mutex = mutexResources(h);
  const holdKind = (g) => {
    if (mutex.has(g.resource)) return 'mutex';
    if (g.mode === 'permit') return 'semaphore';
    return g.mode === 'shared' ? 'read-write shared' : 'read-write exclusive';
  };
  const of = (g, kind, resource) => ({
    client: g.client, agent: g.agent, kind, resource, granted: true,
    from: g.t_requested ?? g.t_granted - (g.waited_ms ?? 0) * 1000, to: g.t_granted,
    exit: g.t_exit ?? windowEnd(g), end: windowEnd(g),
  });
  return [...h.grants.map((g) => of(g, 'fenced mutex', g.resource)),
    ...(h.holds ?? []).map((g) => of(g, holdKind(g), g.resource)),
    ...(h.leaders ?? []).map((l) => of(l, 'election', l.name))];
}

const byName = (a, b) => a.name.localeCompare(b.name, 'en', { numeric: true });

function rosterOf(h, granted) {
  const waitMs = h.cfg.waitMs ?? DEFAULT_WAIT_MS;
  if (h.roster) return h.roster.map((c) => ({ ...c, wait_ms: c.wait_ms ?? waitMs })).sort(byName);
  const clients = new Map();
  for (const a of granted) {
    if (!clients.has(a.client)) {
      clients.set(a.client, { name: a.client, agent: a.agent, kind: a.kind, resources: [],
        wait_ms: waitMs });
    }
    const c = clients.get(a.client);
    if (!c.resources.includes(a.resource)) c.resources.push(a.resource);
  }
  return [...clients.values()].sort(byName);
}

// The failed acquires of the roster's clients, as acquires {..., granted: false, timeout}.
function failedOf(h, roster) {
  const clients = new Map(roster.map((c) => [c.name, c]));
  return (h.failed ?? []).filter((f) => f.resource && f.t_requested !== undefined &&
    clients.has(f.client)).map((f) => ({
    client: f.client, agent: clients.get(f.client).agent, kind: clients.get(f.client).kind,
    resource: f.resource, granted: false, timeout: /timeout$/.test(f.error), from: f.t_requested,
    to: f.t,
  }));
}

// Per resource and kind (a group): each contending client's grants and its share of the fair
// share, grants / (the group's grants / its clients): 1 is fair, 0 never granted. Jain's index
// over the grant counts, (sum x)^2 / (n * sum x^2): 1 when all are equal, 1/n when one client
// has them all. null when the group had no grant.
export function sharesOf(roster, granted) {
  const counts = new Map();
  const key = (...parts) => parts.join('\0');
  for (const a of granted) {
    const k = key(a.client, a.resource, a.kind);
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  const groups = new Map();
  for (const c of roster) {
    for (const resource of c.resources) {
      const k = key(resource, c.kind);
      if (!groups.has(k)) groups.set(k, { resource, kind: c.kind, clients: [] });
      groups.get(k).clients.push({ client: c.name, agent: c.agent,
        grants: counts.get(key(c.name, resource, c.kind)) ?? 0 });
    }
  }
  const rank = (g) => WAIT_KINDS.indexOf(g.kind);
  return [...groups.values()].sort((a, b) => rank(a) - rank(b) ||
    a.resource.localeCompare(b.resource)).map((g) => {
    const n = g.clients.length;
    const total = g.clients.reduce((s, c) => s + c.grants, 0);
    const squares = g.clients.reduce((s, c) => s + c.grants * c.grants, 0);
    const clients = g.clients.map((c) => ({ ...c, share: total ? (c.grants * n) / total : null }));
    const shares = clients.map((c) => c.share);
    return { ...g, clients, grants: total, min_share: total ? Math.min(...shares) : null,
      max_share: total ? Math.max(...shares) : null, jain: total ? (total * total) / (n * squares) : null };
  });
}

// Per kind, the longest granted wait (client-side: from the request to the grant's arrival, ms)
// and the acquires that timed out: over the whole run ("whole run"), per fault name over every
// instance (an acquire counts for a fault when it was waiting at some time in the fault's reach:
// from its start to max_ttl + 1 s after its heal, as verdicts.mjs charges violations), and
// "outside faults". Rows in that order, faults as first injected: [{row, kinds: {kind:
// {longest_ms, client, t, timeouts}}}].
export function waitsOf(h, acquires) {
  const reachUs = (h.cfg.maxTtlMs + 1000) * 1000;
  const faults = h.faults.filter((f) => !f.error);
  const rows = new Map([['whole run', {}], ...faults.map((f) => [f.name, {}]), ['outside faults', {}]]);
  const add = (row, a) => {
    const kinds = rows.get(row);
    const c = kinds[a.kind] ?? (kinds[a.kind] = { longest_ms: null, client: null, t: null, timeouts: 0 });
    if (!a.granted) {
      c.timeouts++;
      return;
    }
    const waited = ms(a.to - a.from);
    if (c.longest_ms === null || waited > c.longest_ms) {
      Object.assign(c, { longest_ms: waited, client: a.client, t: a.to });
    }
  };
  for (const a of acquires) {
    if (!a.granted && !a.timeout) continue;
    add('whole run', a);
    const names = new Set(faults.filter((f) => a.from <= f.heal + reachUs && a.to >= f.start)
      .map((f) => f.name));
    for (const name of names) add(name, a);
    if (!names.size) add('outside faults', a);
  }
  return [...rows].map(([row, kinds]) => ({ row, kinds }));
}

// Whether a fault kept this client out by design: its agent killed, stopped or partitioned, or
// the client itself stopped.
const aimedAt = (f, c) => (f.agents ?? (AGENT_FAULTS.has(f.name) ? [f.target.split(' ')[0]] : []))
  .includes(c.agent) || f.paused?.client === c.name ||
  (f.stopped_holds ?? []).some((s) => s.client === c.name);

// Per client, its spans without a grant: from its exit of one grant (the first span: from the
// earlier of its first request and the traffic's start) to its next grant (the last span: to the
// traffic's end). Its starved time in a span: the time it spent asking (inside an acquire, from its request
// to the grant or the failure) for a resource while another client held that resource (a window
// of check 2's rule), less the reach of every fault aimed at it (aimedAt; start to max_ttl + 1 s
// after the heal). A fault that keeps everybody out holds nobody's window open past its validity,
// so that time does not count either. Starved: a span whose starved time exceeds
// STARVATION_WAIT_FACTOR x its wait_ms while other clients were granted what it asked for inside
// the span. Without failure records (h.failed absent) a span counts as asking throughout, for
// any of the client's resources. Returns {starved: [span], longest: {kind: span}} (the span with
// the most starved time of each kind), each span {client, agent, kind, resources, from, to, open,
// asked_ms, starved_ms, others_granted, timeouts, threshold_ms}.
export function starvationOf(h, roster, granted, failed) {
  const reachUs = (h.cfg.maxTtlMs + 1000) * 1000;
  const holds = groupBy(granted, (a) => a.resource);
  const grantTimes = new Map([...holds]
    .map(([r, list]) => [r, list.map((a) => a.to).sort((x, y) => x - y)]));
  const others = new Map();
  const heldByOthers = (client, resources) => {
    const k = [client, ...resources].join('\0');
    if (!others.has(k)) {
      others.set(k, union(resources.flatMap((r) => (holds.get(r) ?? [])
        .filter((a) => a.client !== client && a.end > a.to).map((a) => [a.to, a.end]))));
    }
    return others.get(k);
  };
  const mineGranted = groupBy(granted, (a) => a.client);
  const mineFailed = groupBy(failed, (a) => a.client);
  const runEnd = h.trafficEnd ?? [...granted.map((a) => a.exit), ...failed.map((a) => a.to)]
    .reduce((a, b) => Math.max(a, b), -Infinity);
  const starved = [];
  const longest = {};
  for (const c of roster) {
    const threshold = STARVATION_WAIT_FACTOR * c.wait_ms * 1000;
    const excused = union(h.faults.filter((f) => !f.error && aimedAt(f, c))
      .map((f) => [f.start, f.heal + reachUs]));
    const grants = [...(mineGranted.get(c.name) ?? [])].sort((a, b) => a.to - b.to);
    const fails = [...(mineFailed.get(c.name) ?? [])].sort((a, b) => a.to - b.to);
    const firstAsk = Math.min(grants[0]?.from ?? Infinity, fails[0]?.from ?? Infinity);
    let from = Math.min(firstAsk, h.trafficStart ?? Infinity);
    let j = 0;
    const span = (to, grant) => {
      const asks = [];
      for (; j < fails.length && fails[j].to <= to; j++) asks.push(fails[j]);
      if (grant) asks.push(grant);
      const asking = h.failed ? asks.map((a) => [a.from, a.to, [a.resource]])
        : [[from, to, c.resources]];
      const resources = [...new Set(asking.flatMap(([, , rs]) => rs))].sort();
      let starvedUs = 0;
      for (const [a, b, rs] of asking) {
        starvedUs += measure(subtract(clip(heldByOthers(c.name, rs), a, b), excused));
      }
      const s = { client: c.name, agent: c.agent, kind: c.kind, resources, from, to, open: !grant,
        asked_ms: ms(measure(union(asking.map(([a, b]) => [a, b])))), starved_ms: ms(starvedUs),
        others_granted: resources.reduce((n, r) => n + countIn(grantTimes.get(r) ?? [], from, to), 0),
        timeouts: asks.filter((a) => a.timeout).length, threshold_ms: ms(threshold) };
      if (starvedUs > threshold && s.others_granted > 0) starved.push(s);
      if (!longest[c.kind] || s.starved_ms > longest[c.kind].starved_ms) longest[c.kind] = s;
    };
    for (const g of grants) {
      span(g.to, g);
      from = Math.max(from, g.exit);
    }
    if (runEnd > from) span(runEnd, null);
  }
  return { starved, longest };
}

const s1 = (msValue) => `${(msValue / 1000).toFixed(1)} s`;
const named = (x) => `${x.client}@${x.agent}`;

function starvedText(h, s) {
  return `${named(s)} (${s.kind}, ${s.resources.join(' ')}): no grant from ${sec(h, s.from)} s ` +
    `to ${s.open ? 'the end of the traffic' : `${sec(h, s.to)} s`}; asked ${s1(s.asked_ms)}, ` +
    `${s1(s.starved_ms)} of it while others held what it asked for (over ${s1(s.threshold_ms)}); ` +
    `others granted it ` +
    `${s.others_granted} time(s); ${s.timeouts} of its acquires timed out`;
}

// The check's lines under its heading: the shares, the waits table, the longest starved spans.
function fairnessLines(shares, waits, longest) {
  const fixed = (x, d) => (x === null ? '-' : x.toFixed(d));
  const out = ['share of the fair share (grants / (the group\'s grants / its clients)), Jain\'s index:'];
  for (const g of shares) {
    out.push(`  ${g.resource} ${g.kind}, ${g.clients.length} clients, ${g.grants} grants: ` +
      `${g.clients.map((c) => `${named(c)} ${fixed(c.share, 2)}`).join(' ')}; min ` +
      `${fixed(g.min_share, 2)}, max ${fixed(g.max_share, 2)}, Jain ${fixed(g.jain, 3)}`);
  }
  out.push('longest granted wait in ms / acquires timed out, per kind; per fault: acquires waiting ' +
    'in its reach (start to max_ttl + 1 s after the heal):');
  out.push(`  ${''.padEnd(28)}${HEADERS.map((x) => x.padEnd(14)).join('')}`);
  for (const { row, kinds } of waits) {
    const cells = WAIT_KINDS.map((k) => (kinds[k]
      ? `${fixed(kinds[k].longest_ms, 0)}/${kinds[k].timeouts}` : '-').padEnd(14));
    out.push(`  ${row.padEnd(28)}${cells.join('')}`);
  }
  out.push(`most time asking while others held it, in one span without a grant: ${WAIT_KINDS
    .filter((k) => longest[k]).map((k) => `${k} ${s1(longest[k].starved_ms)} (${named(longest[k])})`)
    .join(', ') || 'none'}`);
  return out;
}

// The check. Starvations are violations when the run fails on them (cfg.failOnStarvation, else
// FAIL_ON_STARVATION), else findings (reported, reportOnly: why the run does not fail on them).
export function checkFairness(h) {
  const granted = grantedOf(h);
  const roster = rosterOf(h, granted);
  const failed = failedOf(h, roster);
  const shares = sharesOf(roster, granted);
  const waits = waitsOf(h, [...granted, ...failed]);
  const { starved, longest } = starvationOf(h, roster, granted, failed);
  const found = starved.map((s) => ({ t: null, text: starvedText(h, s), span: s }));
  const gate = h.cfg.failOnStarvation ?? FAIL_ON_STARVATION;
  const judged = shares.filter((g) => g.jain !== null);
  const worst = judged.reduce((a, g) => (a && a.jain <= g.jain ? a : g), null);
  const stats = `${roster.length} clients in ${shares.length} groups; lowest Jain's index ` +
    `${worst ? `${worst.jain.toFixed(3)} (${worst.resource} ${worst.kind})` : 'none'}; ` +
    `${new Set(starved.map((s) => s.client)).size} client(s) starved`;
  return { id: 10, title: `no client asks over ${STARVATION_WAIT_FACTOR} x its wait_ms without a ` +
    'grant while others hold what it asks for', stats, violations: gate ? found : [],
  reportOnly: gate ? null : REPORT_ONLY_WHY, reported: gate ? [] : found,
  lines: fairnessLines(shares, waits, longest), shares, waits, longest };
}
