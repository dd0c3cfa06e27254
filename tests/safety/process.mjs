// What every client process of the safety checker (client.mjs, candidate.mjs) shares: its line
// to the checker's register, its connection to its agent (reconnected with backoff when the
// agent is killed under it), and the validity rule.

import { setTimeout as pause } from 'node:timers/promises';

import { LockClient } from '../browser/clients.mjs';
import { mulberry32, randIntFrom } from './rng.mjs';

// µs on CLOCK_MONOTONIC: the same clock in every process of the run.
export const nowUs = () => Number(process.hrtime.bigint() / 1000n);

// A client process's start, from its command line (NAME AGENT_LABEL AGENT_SOCKET
// REGISTER_SOCKET CONFIG_JSON): {name, agentLabel, cfg, random, randInt (seeded by cfg.seed),
// checker (joinRegister's), agent (agentLink's)}.
export async function startClient() {
  const [name, agentLabel, agentSocket, registerSocket, configJson] = process.argv.slice(2);
  const cfg = JSON.parse(configJson);
  if (!Number.isInteger(cfg.seed)) throw new Error(`${name}: no integer seed in the config`);
  const random = mulberry32(cfg.seed);
  const checker = await joinRegister(name, agentLabel, registerSocket);
  return { name, agentLabel, agentSocket, cfg, random, randInt: randIntFrom(random), checker,
    agent: agentLink(agentSocket, checker) };
}

// Joins the checker: {register (its connection), send(record), stopRequested(), leave()}.
async function joinRegister(name, agentLabel, registerSocket) {
  const register = await LockClient.connect(registerSocket);
  const checkerGone = () => process.exit(3); // nothing left to report to
  register.sock.on('close', checkerGone);
  const line = (msg) => register.sock.write(`${JSON.stringify(msg)}\n`);
  line({ op: 'hello', client: name, pid: process.pid, agent: agentLabel });
  return {
    register,
    send: (msg) => line({ op: 'record', client: name, ...msg }),
    stopRequested: () => register.events.some((e) => e.event === 'stop'),
    leave: () => {
      register.sock.off('close', checkerGone);
      register.sock.end(() => process.exit(0));
    },
  };
}

// The connection to the agent: get() connects when there is none (or it closed), retrying with
// backoff and reporting each failed connect; null once a stop was requested. drop(conn) closes
// it, and the next get() connects anew.
function agentLink(agentSocket, { send, stopRequested }) {
  let conn = null;
  let backoffMs = 20;
  return {
    async get() {
      while (!conn || conn.closed) {
        if (stopRequested()) return null;
        try {
          conn = await LockClient.connect(agentSocket, { timeoutMs: 1000 });
          backoffMs = 20;
        } catch {
          send({ type: 'failure', error: 'connect', t: nowUs() });
          await pause(backoffMs);
          backoffMs = Math.min(backoffMs * 2, 500);
        }
      }
      return conn;
    },
    drop(c) {
      c.close();
      if (conn === c) conn = null;
    },
    // A connection made elsewhere (a resume's) becomes the one get() returns.
    adopt(c) {
      if (conn && conn !== c) conn.close();
      conn = c;
    },
    close() {
      if (conn) conn.close();
    },
  };
}

// The end of a grant's validity as docs/protocol.md promises it: validity_ms from when the reply
// was written. The client cannot see that moment, but it is no earlier than the request's send
// time plus waited_ms (rounded up by the agent, hence the 1 ms taken off) and no later than the
// reply's arrival; counting from the arrival would stretch the window by the reply's transit.
export function validityEndOf(reply, tRequested, tGranted) {
  const written = Math.min(tGranted, tRequested + Math.max(0, reply.waited_ms - 1) * 1000);
  return written + reply.validity_ms * 1000;
}

// A hold whose connection went (its agent killed, then restarted on the same socket) resumed
// through the agent's next run while record.validity_end lasts, as the client libraries do
// (docs/protocol.md, resume): `ask` is the resume request. The record's window then runs on to
// the resume's validity (a resume is granted only while a quorum still holds the token, so
// nobody else held it since: docs/safety.md §11); record.resumed says when, record.resume_refused
// why not. The connection it was resumed on (`agent` adopts it), or null: lost.
export async function resumeThroughNextRun(agentSocket, agent, ask, record, stop = () => false) {
  let tries = 0;
  while (nowUs() < record.validity_end && !stop()) {
    tries += 1;
    let next = null;
    try {
      next = await LockClient.connect(agentSocket, { timeoutMs: 500 });
      const tRequested = nowUs();
      const reply = await next.call(ask, { timeoutMs: 2000 });
      const tGranted = nowUs();
      if (reply.ok) {
        record.resumed = { t_requested: tRequested, t_granted: tGranted, tries,
          validity_end_before: record.validity_end };
        record.validity_end = Math.max(record.validity_end,
          validityEndOf(reply, tRequested, tGranted));
        agent.adopt(next);
        return next;
      }
      next.close();
      record.resume_refused = reply.error;
      if (reply.error !== 'no_quorum' && reply.error !== 'shutting_down') return null;
    } catch {
      if (next) next.close(); // not up yet: try again
    }
    await pause(20);
  }
  return null;
}
