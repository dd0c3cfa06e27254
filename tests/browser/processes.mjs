// Child processes, temp dirs and files for the browser tests' fixture (fixture.mjs, which
// re-exports what is exported here) and the safety checker: tracked so that a crash of the test
// process cannot leak them.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as pause } from 'node:timers/promises';


const liveChildren = new Set();
const liveDirs = new Set();
process.on('exit', () => {
  for (const child of liveChildren) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
  for (const dir of liveDirs) fs.rmSync(dir, { recursive: true, force: true });
});
// A runner that gives up on this file (ctest's timeout, Ctrl-C) signals it: run the exit
// handler above rather than die with the children still running.
for (const [sig, code] of [['SIGINT', 130], ['SIGTERM', 143]]) {
  process.once(sig, () => process.exit(code));
}

export function makeTempDir(prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  liveDirs.add(dir);
  return dir;
}

export function removeTempDir(dir) {
  fs.rmSync(dir, { recursive: true, force: true });
  liveDirs.delete(dir);
}

// Spawns argv with stdout and stderr appended to logPath. Resolves once the process is running
// (rejects if it cannot be executed). child.exited resolves to {code, signal} when it ends.
export async function spawnLogged(argv, logPath, env = process.env) {
  const fd = fs.openSync(logPath, 'a');
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', fd, fd], env });
  fs.closeSync(fd);
  child.exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      liveChildren.delete(child);
      resolve({ code, signal });
    });
  });
  await new Promise((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', (err) => reject(new Error(`cannot start ${argv[0]}: ${err.message}`)));
  });
  liveChildren.add(child);
  return child;
}

export function hasExited(child) {
  return child.exitCode !== null || child.signalCode !== null;
}

// A process that is no child of ours (an agent that took over by an in-place upgrade: the old
// one started it): signalled by pid, its end found by polling /proc, where, reparented to init,
// it may linger as a zombie (gone all the same). Its exit status is not known: -1.
export class AdoptedProcess {
  constructor(pid) {
    this.pid = pid;
    this.exitCode = null;
    this.signalCode = null;
    this.exited = this.watch();
    liveChildren.add(this);
  }

  kill(sig = 'SIGTERM') {
    try {
      process.kill(this.pid, sig);
      return true;
    } catch {
      return false;
    }
  }

  gone() {
    try {
      const stat = fs.readFileSync(`/proc/${this.pid}/stat`, 'utf8');
      return stat[stat.lastIndexOf(')') + 2] === 'Z';
    } catch {
      return true;
    }
  }

  async watch() {
    // Unref'd: watching must not keep the test process alive.
    while (!this.gone()) await new Promise((resolve) => setTimeout(resolve, 10).unref());
    this.exitCode = -1;
    liveChildren.delete(this);
    return { code: -1, signal: null };
  }
}

// Sends sig and waits up to graceMs for the exit; SIGKILL after that.
export async function stopChild(child, sig = 'SIGTERM', graceMs = 3000) {
  if (!child || hasExited(child)) return;
  child.kill(sig);
  const grace = new AbortController(); // so that the timer does not keep the process alive
  const timer = pause(graceMs, 'timeout', { signal: grace.signal }).catch(() => null);
  const first = await Promise.race([child.exited, timer]);
  grace.abort();
  if (first === 'timeout') {
    child.kill('SIGKILL');
    await child.exited;
  }
}

export function fileTail(file, maxBytes = 8192) {
  try {
    const text = fs.readFileSync(file, 'utf8');
    return text.length > maxBytes ? text.slice(-maxBytes) : text;
  } catch {
    return '';
  }
}

// The first maxBytes of file from offset on ('' if it cannot be read).
export function fileFrom(file, offset, maxBytes = 1 << 20) {
  let fd;
  try {
    fd = fs.openSync(file, 'r');
    const buf = Buffer.alloc(maxBytes);
    const n = fs.readSync(fd, buf, 0, maxBytes, offset);
    return buf.toString('utf8', 0, n);
  } catch {
    return '';
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

// argv with each `--flag value` pair of extra replacing the pair of the same flag in argv
// (flags that may repeat, such as --master, are not replaced when extra does not name them).
export function overrideFlags(argv, extra) {
  const named = new Set(extra.filter((a) => a.startsWith('--')));
  const out = [];
  for (let i = 0; i < argv.length; i++) {
    if (named.has(argv[i]) && i + 1 < argv.length && !argv[i + 1].startsWith('--')) {
      i++; // skip the default and its value
      continue;
    }
    out.push(argv[i]);
  }
  return out.concat(extra);
}

export async function freePort() {
  const server = net.createServer();
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}
