// The faults the checker injects while the clients run. Each records when it started and when
// it was healed (µs on CLOCK_MONOTONIC, as every other time of the run): the checker reports how
// soon after each heal grants resumed (goal: max_ttl + 1 s). A fault aimed at agents names them
// (agents: their labels): their clients cannot be granted meanwhile (the fairness check, 10,
// does not count that time against them).
//
// ctx: {cluster, agents, register, cfg, say, clientNames, holderNames, proxy, clocks}. round:
// which cycle this is, to rotate the targets. Every master, agent and register client targeted
// is chosen by the round, never by timing or chance; the holders stopped by SIGSTOP holders are
// the first of each kind to hold (a given one may not get its turn).

import { setTimeout as pause } from 'node:timers/promises';

import { waitUntil } from '../browser/fixture.mjs';
import { CLOCK_FAULTS, NETWORK_FAULTS, slowHolder } from './net_faults.mjs';
import { nowUs } from './register.mjs';

const N = (ctx) => ctx.cluster.masters.length;

// The holder names by kind (the name without its number): {kind: [names]}.
function holdersByKind(names) {
  const byKind = new Map();
  for (const n of names) {
    const kind = n.replace(/\d+$/, '');
    if (!byKind.has(kind)) byKind.set(kind, []);
    byKind.get(kind).push(n);
  }
  return byKind;
}

// kill -9 masters, keep them down for cfg.masterDownMs, restart them empty on the same ports.
async function killMasters(ctx, indices) {
  const masters = indices.map((i) => ctx.cluster.master(i));
  const start = nowUs();
  await Promise.all(masters.map((m) => m.kill()));
  await pause(ctx.cfg.masterDownMs);
  const healing = nowUs();
  // Restarted one after the other: the port is each one's own, no race between them.
  for (const m of masters) await m.restart();
  return { start, healing, heal: nowUs(), target: masters.map((m) => m.address).join(' ') };
}

// Stops the client named target at its next read or holding message (register.mjs), so that it
// is inside its hold, lets it go 1 s after its validity ended, and waits for what it does next
// (after(token): the register's record of it, null until it came; `what` names it). Returns the
// pause p {client, pid, t, resource, fence, token, validityEndUs}, that record, and the fault
// record's common fields.
async function stopPastValidity(ctx, armedAt, target, after, what) {
  const pick = typeof target === 'function' ? target : (client) => client === target;
  const p = await ctx.register.pauseNextRead(pick, 60000);
  try {
    const stopForMs = Math.max(0, (p.validityEndUs - nowUs()) / 1000) + 1000;
    await pause(stopForMs);
  } finally {
    process.kill(p.pid, 'SIGCONT');
  }
  const heal = nowUs();
  const next = await waitUntil(() => after(p.token), {
    timeoutMs: 60000, intervalMs: 10, what: `${what} of client ${p.client}`,
  });
  return { p, next, fault: { start: p.t, armed: armedAt, healing: heal, heal,
    target: `${p.client} (pid ${p.pid})` } };
}

export const FAULTS = [
  {
    name: 'kill -9 one master',
    run: (ctx, round) => killMasters(ctx, [round % N(ctx)]),
  },
  {
    name: 'kill -9 two masters',
    run: (ctx, round) => killMasters(ctx, [(round + 1) % N(ctx), (round + 3) % N(ctx)]),
  },
  {
    // Longer than any ttl: every lock key it holds expires while it cannot answer.
    name: 'SIGSTOP one master',
    run: async (ctx, round) => {
      const m = ctx.cluster.master((round + 2) % N(ctx));
      const start = nowUs();
      m.pause();
      try {
        await pause(ctx.cfg.maxTtlMs + 1000);
      } finally {
        m.resume();
      }
      return { start, healing: nowUs(), heal: nowUs(), target: m.address };
    },
  },
  {
    // The register stops the round's client at its next read, before it sees the value: it
    // holds a grant and is between its read and its write. It stays stopped until 1 s after its
    // validity ended; its late write must then be rejected if a higher fence was accepted.
    name: 'SIGSTOP one client',
    run: async (ctx, round) => {
      // Fast and slow clients in turn (the first 3 are the slow ones).
      const target = ctx.clientNames[(round * 4 + 3) % ctx.clientNames.length];
      const { p, next: write, fault } = await stopPastValidity(ctx, nowUs(), target,
        (token) => ctx.register.writeOf(token), 'the late write');
      return {
        ...fault,
        paused: { client: p.client, resource: p.resource, fence: p.fence, token: p.token,
          validity_end: p.validityEndUs, write_t: write.t, write_accepted: write.accepted },
      };
    },
  },
  {
    name: 'kill -9 one agent',
    run: async (ctx, round) => {
      const agent = ctx.agents[round % ctx.agents.length];
      const start = nowUs();
      await agent.kill();
      await pause(ctx.cfg.agentDownMs);
      const healing = nowUs();
      await agent.restart();
      return { start, healing, heal: nowUs(), target: agent.label, agents: [agent.label] };
    },
  },
  {
    // The round's agent killed while its slow client holds r0, and started again at once on the
    // same socket: its clients resume the holds it granted through the new run while their
    // validity lasts (client.mjs resumeIfGone), and nobody else may hold them meanwhile.
    name: 'kill -9 agent + resume',
    run: async (ctx, round) => {
      const agent = ctx.agents[round % ctx.agents.length];
      const holder = await slowHolder(ctx, round);
      const start = nowUs();
      await agent.kill();
      const healing = nowUs();
      await agent.restart();
      return { start, healing, heal: nowUs(), agents: [agent.label],
        target: `${agent.label}${holder ? ` (${holder} holding)` : ''}` };
    },
  },
  {
    // The round's agent upgraded in place while its clients hold, wait and observe: the new
    // process takes over its socket, every connection and every hold with no round trip
    // (docs/upgrade.md). No client sees anything (no lost, no closed connection), and nobody
    // else may hold what they hold meanwhile.
    name: 'upgrade under load',
    run: async (ctx, round) => {
      const agent = ctx.agents[round % ctx.agents.length];
      const holder = await slowHolder(ctx, round);
      const start = nowUs();
      const up = await agent.upgrade();
      return { start, healing: nowUs(), heal: nowUs(), agents: [agent.label],
        target: `${agent.label} (pid ${up.previous_pid} -> ${up.pid}, requests held ` +
          `${up.handover_ms} ms${holder ? `, ${holder} holding` : ''})` };
    },
  },
  {
    // One holder of each kind at once (a plain mutex holder, a semaphore holder, a reader, a
    // leader and a writer: the first of each kind to report that it holds), each stopped inside
    // its hold until 1 s after its validity ended: others take its permit or the lock meanwhile, and its late release must
    // free nothing of theirs (checks 6 and 7 see the holds that follow). A leader's agent goes on
    // renewing its hold while it is stopped: nobody else is elected, and the leader, woken past
    // its validity, must stop leading (check 8).
    name: 'SIGSTOP holders',
    applies: (ctx) => ctx.holderNames.length > 0 && ctx.cfg.stopHolders,
    run: async (ctx) => {
      const armedAt = nowUs();
      // Whichever client of each kind holds first: a given one may wait long for its turn (a
      // plain mutex's clients on other agents can be starved by two on one agent handing it
      // over locally, see tests/safety/README.md).
      const targets = [...holdersByKind(ctx.holderNames).values()]
        .map((names) => (client) => names.includes(client));
      // Every stop settles (each pause disarms itself on its timeout) before a failure is
      // reported, so that none goes on into the next fault.
      const settled = await Promise.allSettled(targets.map((target) => stopPastValidity(ctx,
        armedAt, target, (token) => ctx.register.holdOf(token), 'the hold record')));
      const failed = settled.find((x) => x.status === 'rejected');
      if (failed) throw failed.reason;
      const stops = settled.map((x) => x.value);
      const start = Math.min(...stops.map((x) => x.fault.start));
      const heal = Math.max(...stops.map((x) => x.fault.heal));
      return {
        ...stops[0].fault, start, healing: heal, heal,
        target: stops.map((x) => x.fault.target).join(', '),
        stopped_holds: stops.map(({ p, next: rec, fault }) => ({ client: p.client,
          resource: p.resource, mode: rec.mode ?? 'leader', permit: rec.permit, term: rec.term,
          token: p.token, validity_end: p.validityEndUs, woken: fault.heal,
          release: rec.release ?? rec.resign })),
      };
    },
  },
  ...CLOCK_FAULTS,
  ...NETWORK_FAULTS,
  {
    // The round's agent stopped past the ttl while one of its clients holds a lock: it cannot
    // renew, answer or hand anything over; every key it holds expires and other agents grant
    // them. Its clients' windows end at their validity (the checks count no further).
    name: 'SIGSTOP one agent',
    run: async (ctx, round) => {
      const agent = ctx.agents[round % ctx.agents.length];
      const holder = await slowHolder(ctx, round);
      const start = nowUs();
      if (!agent.child.kill('SIGSTOP')) throw new Error(`${agent.label} could not be stopped`);
      try {
        await pause(ctx.cfg.maxTtlMs + 1000);
      } finally {
        agent.child.kill('SIGCONT');
      }
      return { start, healing: nowUs(), heal: nowUs(), agents: [agent.label],
        target: `${agent.label}${holder ? ` (${holder} holding)` : ''}` };
    },
  },
];

// The faults this run injects, in order: those whose applies(ctx) allows (default all) and whose
// names contain one of cfg.faultFilter's (when given).
export const faultsFor = (ctx) => FAULTS.filter((f) => (!f.applies || f.applies(ctx)) &&
  (!ctx.cfg.faultFilter || ctx.cfg.faultFilter.some((x) => f.name.includes(x))));

// The first grant (any resource, any agent) after t: a record with t_granted >= t, or null.
function grantAfter(register, t) {
  for (let i = register.grants.length - 1; i >= 0; i--) {
    if (register.grants[i].t_granted >= t) return register.grants[i];
  }
  return null;
}

// Runs the faults in order, cfg.faultGapMs of plain traffic after each, until done() says so
// (checked after each fault; at least one fault runs). The next fault starts only once a grant
// came after the heal (or cfg.resumeFailMs passed without one: the checks report it), so that
// each fault, the last one too, is followed by the traffic that shows whether grants resumed.
// Returns the fault records.
export async function runFaults(ctx, done) {
  const records = [];
  const faults = faultsFor(ctx);
  for (let i = 0; ; i++) {
    const fault = faults[i % faults.length];
    const round = Math.floor(i / faults.length);
    ctx.say(`fault ${i + 1}: ${fault.name}`);
    let rec;
    try {
      rec = { name: fault.name, round, ...(await fault.run(ctx, round)) };
      ctx.say(`  ${rec.target}: healed after ${((rec.heal - rec.start) / 1e6).toFixed(1)} s`);
    } catch (err) {
      // Not injected (or not healed) as planned: the run cannot vouch for this fault.
      rec = { name: fault.name, round, start: nowUs(), heal: nowUs(), error: err.message };
      ctx.say(`  FAILED: ${err.message}`);
    }
    records.push(rec);
    await pause(ctx.cfg.faultGapMs);
    const resumeBy = rec.heal / 1000 + ctx.cfg.resumeFailMs; // ms on the same clock
    const left = Math.max(1, resumeBy - nowUs() / 1000);
    try {
      await waitUntil(() => grantAfter(ctx.register, rec.heal), {
        timeoutMs: left, intervalMs: 20, what: 'a grant after the heal',
      });
    } catch {
      ctx.say(`  no grant within ${ctx.cfg.resumeFailMs} ms of the heal`);
    }
    if (done(records)) return records;
  }
}
