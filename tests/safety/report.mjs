// What the safety checker prints (the summary) and keeps (the JSON history of the run).

import fs from 'node:fs';

import { FENCES, KINDS, SAFE, faultTable } from './verdicts.mjs';

const SHOWN_PER_CHECK = 5;

function countBy(items, key) {
  const counts = {};
  for (const item of items) {
    const k = key(item);
    counts[k] = (counts[k] || 0) + 1;
  }
  return counts;
}

const list = (counts) =>
  Object.entries(counts)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k} ${v}`)
    .join(', ') || 'none';

// The first SHOWN_PER_CHECK of a check's violations (or findings), then how many more.
function shownLines(out, texts) {
  for (const text of texts.slice(0, SHOWN_PER_CHECK)) out.push(`        ${text}`);
  if (texts.length > SHOWN_PER_CHECK) {
    out.push(`        ... and ${texts.length - SHOWN_PER_CHECK} more (see the history)`);
  }
}

// The summary as lines of text. problems: run-level failures besides the checks' violations.
export function summaryLines(h, checks, problems, mode) {
  const { cfg } = h;
  const trafficS = (h.trafficEnd - h.trafficStart) / 1e6;
  const writes = countBy(h.grants, (g) => g.write);
  const out = [];
  out.push(`lockwarden safety checker, ${mode} mode: ${cfg.masters} masters, ${cfg.agents} agents, ` +
    `${cfg.clients} clients, ${cfg.resources.length} resources, ttl ${cfg.ttlMinMs}-${cfg.ttlMaxMs} ms, ` +
    `max_ttl ${cfg.maxTtlMs} ms, fenced grants, seed ${cfg.seed}`);
  out.push(`grants: ${h.grants.length} in ${trafficS.toFixed(1)} s of traffic ` +
    `(${(h.grants.length / trafficS).toFixed(1)}/s); first grant ${h.firstGrantMs.toFixed(0)} ms after ` +
    `the masters started (restart quarantine: none before max_ttl)`);
  out.push(`  by agent: ${list(countBy(h.grants, (g) => g.agent))}`);
  out.push(`  by resource: ${list(countBy(h.grants, (g) => g.resource))}`);
  out.push(`  writes: ${list(writes)}`);
  const holds = h.holds ?? [];
  if (holds.length) {
    const kinds = cfg.holdKinds.filter((k) => k.clients > 0)
      .map((k) => `${k.clients} ${k.kind} on ${k.resources ? `${k.several} of ${k.resources} at once` : k.resource}` +
        `${k.acquire.permits ? ` (K=${k.acquire.permits})` : ''}`);
    out.push(`holds: ${holds.length} (${list(countBy(holds, (g) => g.mode))}); clients: ${kinds.join(', ')}`);
    out.push(`  by agent: ${list(countBy(holds, (g) => g.agent))}`);
  }
  const leaders = h.leaders ?? [];
  const e = cfg.elections;
  if (leaders.length || (e && e.candidates > 0)) {
    out.push(`leaders: ${leaders.length} (${list(countBy(leaders, (l) => l.name))}); ` +
      `${e.candidates} candidates, ${e.candidates > 0 ? Math.min(e.observers, cfg.agents) : 0} ` +
      `observers; ttl ` +
      `${e.ttlMinMs}-${e.ttlMaxMs} ms`);
    out.push(`  by agent: ${list(countBy(leaders, (l) => l.agent))}; extends: ` +
      `${list(countBy(leaders.flatMap((l) => l.extends), (x) => (x.ok ? 'ok' : x.error)))}`);
    const observed = h.observed ?? [];
    const reads = observed.filter((o) => o.kind === 'read');
    out.push(`  observed: leader reads ${reads.length} ` +
      `(${list(countBy(reads, (o) => o.error ?? (o.leader ? 'a leader' : 'none')))}), ` +
      `events ${observed.filter((o) => o.kind === 'event').length}`);
  }
  const detached = [...h.grants, ...holds].filter((g) => g.detached);
  if (detached.length || cfg.detachShare > 0) {
    out.push(`detached leases: ${detached.length} (grants ` +
      `${h.grants.filter((g) => g.detached).length}, write holds ${holds.filter((g) => g.detached).length}); ` +
      `acquiring connection closed right after the grant: ` +
      `${detached.filter((g) => g.acquiring_closed).length}; released through another connection: ` +
      `${list(countBy(detached, (g) => g.release))}`);
  }
  const sets = holds.filter((g) => g.set);
  if (sets.length) out.push(`holds taken several at once: ${sets.length}`);
  const reentered = holds.filter((g) => g.reentered);
  if (reentered.length) {
    out.push(`reentrant holds: ${reentered.length} taken twice by one owner (second acquire: ` +
      `${list(countBy(reentered, (g) => g.reentered))}; first release, leaving it held: ` +
      `${list(countBy(reentered, (g) => g.unwound ?? 'not sent'))})`);
  }
  const resumes = [...h.grants, ...holds].filter((g) => g.resumed || g.resume_refused);
  if (resumes.length) {
    out.push(`resumes after an agent kill: ${resumes.filter((g) => g.resumed).length} held on ` +
      `(grants ${h.grants.filter((g) => g.resumed).length}, holds ` +
      `${holds.filter((g) => g.resumed).length}); refused: ` +
      `${list(countBy(resumes.filter((g) => !g.resumed), (g) => g.resume_refused))}`);
  }
  out.push(`acquire failures: ${list(h.failures)}`);
  out.push(`faults injected: ${h.faults.length}  (t = s since start; heal -> first grant after it)`);
  out.push(`    #  t start  down s  ${'fault'.padEnd(23)}  ${'target'.padEnd(40)} ` +
    'grants during  holds during  heal -> grant');
  h.faults.forEach((f, i) => {
    const t = ((f.start - h.t0) / 1e6).toFixed(1).padStart(7);
    const down = ((f.heal - f.start) / 1e6).toFixed(1).padStart(6);
    const resume = f.resume_ms === null ? 'none' : `${f.resume_ms.toFixed(0)} ms`;
    const target = f.error ? `FAILED: ${f.error}` : f.target;
    out.push(`  ${String(i + 1).padStart(3)}  ${t}  ${down}  ${f.name.padEnd(23)}  ${target.padEnd(40)} ` +
      `${String(f.grants_during).padStart(13)}  ${String(f.holds_during ?? 0).padStart(12)}  ` +
      `${resume.padStart(13)}`);
    if (f.paused) {
      const p = f.paused;
      out.push(`${' '.repeat(40)}late write (${p.resource}, fence ${p.fence}) ` +
        `${p.write_accepted ? 'ACCEPTED' : 'rejected'}, ${p.higher_accepted_meanwhile} higher ` +
        `fence(s) accepted meanwhile`);
    }
    for (const s of f.stopped_holds ?? []) {
      const what = s.mode === 'leader' ? `leader (term ${s.term}) of` : s.mode === 'permit'
        ? `permit ${s.permit} of` : `${s.mode} hold of`;
      out.push(`${' '.repeat(40)}${s.client}: ${what} ${s.resource} held past its validity; ` +
        `${s.taken_meanwhile} hold(s) granted to others meanwhile; its release: ${s.release}`);
    }
  });
  out.push(...tableLines(h));
  out.push('checks:');
  for (const c of checks) {
    const expected = c.violations.filter((v) => v.expected).length;
    const unexpected = c.violations.length - expected;
    let status = unexpected ? `FAIL ${unexpected} violation(s)` : 'ok';
    if (c.reportOnly) {
      status = `REPORT ONLY, ${c.reported.length} finding(s), not failing the run (${c.reportOnly})`;
    }
    const excused = expected ? `; ${expected} where the fault's verdict is not "safe" (see the table)` : '';
    out.push(`  (${c.id}) ${c.title}: ${status}${excused}  [${c.stats}]`);
    for (const line of c.lines ?? []) out.push(`        ${line}`);
    const shown = [...c.violations].sort((a, b) => a.expected - b.expected);
    shownLines(out, [...shown.map((v) => {
      const f = v.fault === null || v.fault === undefined ? 'no fault' : `fault ${v.fault + 1}`;
      return `${v.expected ? 'expected' : 'UNEXPECTED'} (${f}): ${v.text}`;
    }), ...(c.reported ?? []).map((v) => `reported: ${v.text}`)]);
  }
  for (const p of problems) out.push(`problem: ${p}`);
  const violations = checks.reduce((n, c) => n + c.violations.length, 0);
  const unexpected = checks.reduce((n, c) => n + c.violations.filter((v) => !v.expected).length, 0);
  const pass = unexpected === 0 && problems.length === 0;
  out.push(`RESULT: ${pass ? 'PASS' : 'FAIL'}: ${h.grants.length} grants, ${holds.length} holds, ` +
    `${leaders.length} leaders, ${detached.length} detached, ` +
    `${h.faults.length} faults, ` +
    `${unexpected} unexpected violation(s) (${violations - unexpected} expected), ` +
    `${checks.reduce((n, c) => n + (c.reported?.length ?? 0), 0)} reported only, ` +
    `${problems.length} problem(s)`);
  return { lines: out, pass };
}

const VERDICT_LETTER = { [SAFE]: 'S', [FENCES]: 'F' };

// The fault x kind table: per fault name and kind, the verdict docs/proof.md states (S safe,
// F safe with fences, N not safe), violations / records granted in the faults' reach (a "!"
// after the violations: some were not allowed by the verdict), and the slowest time from a heal
// to the kind's next grant ("-": the kind has no clients).
function tableLines(h) {
  const rows = faultTable(h);
  if (!rows.length) return [];
  const goal = h.cfg.resumeGoalMs ?? h.cfg.maxTtlMs + 1000;
  const w = 19;
  const out = [`fault x kind: verdict (S safe, F safe with fences, N not safe; docs/proof.md), ` +
    `violations/grants in the faults' reach, slowest heal -> next grant (goal ${goal} ms; ` +
    `* missed after some heal)`];
  out.push(`  ${'fault'.padEnd(28)}${KINDS.map((k) => k.padEnd(w)).join('')}`);
  for (const r of rows) {
    const cells = KINDS.map((k) => {
      const c = r.cells[k];
      if (!c.grants && c.slowest_ms === null) return `${VERDICT_LETTER[c.verdict] ?? 'N'} -`.padEnd(w);
      const slow = c.slowest_ms === null ? 'none' : `${(c.slowest_ms / 1000).toFixed(2)}s`;
      const missed = c.met < c.healed ? '*' : '';
      return (`${VERDICT_LETTER[c.verdict] ?? 'N'} ${c.violations}${c.unexpected ? '!' : ''}/` +
        `${c.grants} ${slow}${missed}`).padEnd(w);
    });
    out.push(`  ${`${r.name} x${r.count}`.padEnd(28)}${cells.join('')}`);
  }
  return out;
}

// Writes the history as one JSON object, the big arrays one element per line, without building
// the whole text in memory (a long run has hundreds of thousands of ops).
export function writeHistory(file, h, checks, problems) {
  const fd = fs.openSync(file, 'w');
  const put = (s) => fs.writeSync(fd, s);
  const { grants, holds = [], leaders = [], observed = [], failed = [], ops, ...rest } = h;
  const head = { ...rest, checks, problems };
  put(JSON.stringify(head, null, 1).replace(/\n}$/, ',\n'));
  const arrays = [['grants', grants], ['holds', holds], ['leaders', leaders], ['observed', observed],
    ['failed', failed], ['register_ops', ops]];
  arrays.forEach(([name, items], k) => {
    put(` "${name}": [\n`);
    items.forEach((item, i) => put(`  ${JSON.stringify(item)}${i + 1 < items.length ? ',' : ''}\n`));
    put(k + 1 < arrays.length ? ' ],\n' : ' ]\n');
  });
  put('}\n');
  fs.closeSync(fd);
}
