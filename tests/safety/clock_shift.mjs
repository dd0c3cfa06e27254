// The clock-jump fault's parts on the test side: building the LD_PRELOAD shim (clock_shift.c,
// whose header states what it shifts and why it is not libfaketime), writing the offset file
// it reads, and the environment that puts a process under it.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const source = path.join(path.dirname(fileURLToPath(import.meta.url)), 'clock_shift.c');

// <outDir>/libclockshift.so, compiled with `cc` unless it exists and is newer than
// clock_shift.c. Returns its absolute path. Throws (with cc's output) if cc fails.
export function buildClockShift(outDir) {
  const lib = path.resolve(outDir, 'libclockshift.so');
  let fresh = false;
  try {
    fresh = fs.statSync(lib).mtimeMs >= fs.statSync(source).mtimeMs;
  } catch {
    // not built yet
  }
  if (!fresh) {
    fs.mkdirSync(outDir, { recursive: true });
    execFileSync('cc', ['-O2', '-shared', '-fPIC', '-o', lib, source], { stdio: 'pipe' });
  }
  return lib;
}

// The offset file: created (or reset) holding offset 0 when constructed, so construct it
// before starting a process that maps it. set(ms) rewrites the 8 bytes in place (the file
// never shrinks while mapped, see clock_shift.c); a process under the shim sees the new
// offset at its next clock read. ms: the wall-clock offset in milliseconds, a safe integer.
export class ClockShift {
  constructor(file) {
    this.file = file;
    fs.writeFileSync(file, Buffer.alloc(8));
  }

  set(ms) {
    if (!Number.isSafeInteger(ms)) throw new Error(`clock shift must be an integer ms: ${ms}`);
    const buf = Buffer.alloc(8);
    buf.writeBigInt64LE(BigInt(ms));
    const fd = fs.openSync(this.file, 'r+');
    try {
      fs.writeSync(fd, buf, 0, 8, 0);
    } finally {
      fs.closeSync(fd);
    }
  }

  // The offset the file holds now.
  get ms() {
    const fd = fs.openSync(this.file, 'r');
    try {
      const buf = Buffer.alloc(8);
      if (fs.readSync(fd, buf, 0, 8, 0) < 8) return 0;
      return Number(buf.readBigInt64LE());
    } finally {
      fs.closeSync(fd);
    }
  }
}

// The environment variables that run a process under the shim with the offset from file
// (to merge over process.env). ld.so splits LD_PRELOAD at spaces and colons: the path must
// have none.
export function clockShiftEnv(libPath, file) {
  if (/[\s:]/.test(libPath)) throw new Error(`LD_PRELOAD cannot take the path ${libPath}`);
  return { LD_PRELOAD: libPath, LW_CLOCK_SHIFT_FILE: file };
}
