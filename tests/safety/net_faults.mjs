// The faults between agents and masters and in the masters' clocks (faults.mjs runs them with
// the others; the same record shape: start, heal, target, and agents for one aimed at an agent).
//
// ctx.proxy: the fault proxy every agent reaches every master through (fault_proxy.mjs), one
// link per agent and master, named linkId(agent, master). ctx.clocks: per master its wall-clock
// shift (clock_shift.mjs), which the master's redis-server reads on every clock call.
// Targets are chosen by the round, never by timing or chance.

import { setTimeout as pause } from 'node:timers/promises';

import { waitUntil } from '../browser/fixture.mjs';
import { nowUs } from './register.mjs';

export const linkId = (agent, master) => `a${agent}-m${master}`;

const N = (ctx) => ctx.cluster.masters.length;
// round-th choice of k distinct masters.
const mastersOf = (ctx, round, k) => Array.from({ length: k }, (_, j) => (round + j) % N(ctx));
// Every agent's links to the given masters.
const linksTo = (ctx, masters) =>
  ctx.agents.flatMap((_, a) => masters.map((m) => linkId(a, m)));
const addresses = (ctx, masters) => masters.map((m) => ctx.cluster.master(m).address).join(' ');

// Longer than any ttl: every key the fault cuts off expires before it heals.
const pastTtl = (ctx) => ctx.cfg.maxTtlMs + 1000;

// Applies fault to links for forMs, then lets them pass again. Healed once the last byte held
// back could have been delivered: at once for hold and reset (what was held is flushed when
// they pass again), after the delay for delay (each chunk keeps its own due time).
async function netFault(ctx, links, fault, forMs, target) {
  const start = nowUs();
  await ctx.proxy.set(links, fault);
  try {
    await pause(forMs);
  } finally {
    await ctx.proxy.set(links, { mode: 'pass' });
  }
  const healing = nowUs();
  if (fault.mode === 'delay') await pause(fault.ms);
  return { start, healing, heal: nowUs(), target };
}

// Waits (up to 10 s) until the round's slow client holds r0, so that the fault finds a lock
// held that others wait for. Returns the client's name if it did, else null.
export async function slowHolder(ctx, round) {
  const holder = `slow${round % ctx.agents.length}`;
  const holding = await waitUntil(() => ctx.register.isHolding(holder), {
    timeoutMs: 10000, intervalMs: 5, what: `${holder} to hold a lock`,
  }).catch(() => false);
  return holding ? holder : null;
}

// The masters' clocks leap forward by more than any ttl, while the round's slow client holds
// r0: every lock key on them expires at once (redis expires keys by its wall clock), as after
// an NTP step or a VM resumed late. The clock stays ahead (a step is not undone); healed at the
// jump itself.
async function clockJump(ctx, round, masters) {
  const holder = await slowHolder(ctx, round);
  const start = nowUs();
  for (const m of masters) ctx.clocks[m].set(ctx.clocks[m].ms + pastTtl(ctx));
  const heal = nowUs();
  return { start, healing: heal, heal,
    target: `${addresses(ctx, masters)} +${pastTtl(ctx)} ms${holder ? ` (${holder} holding)` : ''}` };
}

export const CLOCK_FAULTS = [
  {
    // Safe while every holder has more than a quorum of keys; a holder with a bare quorum (a
    // split vote) that had one of its keys on this master can be joined (Kleppmann).
    name: 'clock jump, one master',
    run: (ctx, round) => clockJump(ctx, round, mastersOf(ctx, round, 1)),
  },
  {
    // A majority: every holder loses its quorum at once.
    name: 'clock jump, 3 masters',
    run: (ctx, round) => clockJump(ctx, round + 1, mastersOf(ctx, round + 1, 3)),
  },
];

export const NETWORK_FAULTS = [
  {
    // Every reply of one master comes after the node timeout: the agents count it as failed
    // (the connection stays, the late replies are read and dropped), so grants use the others.
    name: 'delay > node timeout',
    run: (ctx, round) => {
      const m = mastersOf(ctx, round + 2, 1);
      const ms = 4 * ctx.cfg.nodeTimeoutMs;
      return netFault(ctx, linksTo(ctx, m), { mode: 'delay', ms, direction: 'both' }, pastTtl(ctx),
        `${addresses(ctx, m)} ${ms} ms each way`);
    },
  },
  {
    // Requests reach one master after the ttl of the lock they are for: a late acquire, renewal
    // or release lands when its lock is long gone (or someone else's), on connections the agent
    // dropped as stalled meanwhile.
    name: 'delay > ttl',
    run: (ctx, round) => {
      const m = mastersOf(ctx, round + 3, 1);
      const ms = ctx.cfg.maxTtlMs + 500;
      return netFault(ctx, linksTo(ctx, m), { mode: 'delay', ms, direction: 'up' }, pastTtl(ctx),
        `${addresses(ctx, m)} requests +${ms} ms`);
    },
  },
  {
    // One master unreachable both ways, connections open: nothing is answered, and what was
    // sent arrives when it heals (as TCP retransmits).
    name: 'blackhole one master',
    run: (ctx, round) => {
      const m = mastersOf(ctx, round + 4, 1);
      return netFault(ctx, linksTo(ctx, m), { mode: 'hold', direction: 'both' }, pastTtl(ctx),
        addresses(ctx, m));
    },
  },
  {
    // One direction only: two masters apply every request but their replies never come back
    // while it lasts, so they hold keys their agents do not count.
    name: 'replies lost, 2 masters',
    run: (ctx, round) => {
      const m = mastersOf(ctx, round, 2);
      return netFault(ctx, linksTo(ctx, m), { mode: 'hold', direction: 'down' }, pastTtl(ctx),
        addresses(ctx, m));
    },
  },
  {
    // Every connection to one master reset (RST both ways) with requests in flight, and new
    // ones reset for a second.
    name: 'reset one master',
    run: (ctx, round) => {
      const m = mastersOf(ctx, round + 1, 1);
      return netFault(ctx, linksTo(ctx, m), { mode: 'reset' }, 1000, addresses(ctx, m));
    },
  },
  {
    // One agent cut off from a majority of the masters (the others reach all of them): its
    // holds cannot be renewed and expire; other agents take them.
    name: 'partition one agent',
    run: (ctx, round) => {
      const a = round % ctx.agents.length;
      const m = mastersOf(ctx, round + 2, 3);
      return netFault(ctx, m.map((j) => linkId(a, j)), { mode: 'hold', direction: 'both' },
        pastTtl(ctx), `${ctx.agents[a].label} from ${addresses(ctx, m)}`)
        .then((rec) => ({ ...rec, agents: [ctx.agents[a].label] }));
    },
  },
];
