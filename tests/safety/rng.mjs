// Seeded pseudo-random numbers for the safety checker: the same seed gives every client the same
// sequence of choices (resource, ttl, hold, back-off) and the checker the same fault targets, so
// a failing run can be repeated with its seed (LOCKWARDEN_SAFETY_SEED or --seed). The processes
// still race each other: the seed fixes the choices, not the interleaving.

// mulberry32: a 32-bit state, good enough for test choices. Returns () => float in [0, 1).
export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// A seed for one part of the run (a client by name, the fault schedule): the run's seed mixed
// with the name, so that the parts do not share one sequence.
export function subSeed(seed, name) {
  let h = (seed >>> 0) ^ 0x811c9dc5;
  for (const ch of String(name)) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return h >>> 0;
}

// An integer in [lo, hi] from rand.
export const randIntFrom = (rand) => (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

// The run's seed: text (from --seed or LOCKWARDEN_SAFETY_SEED) if given, else fallback (a fixed
// value in the gating short mode; the long mode passes null and gets a random one). Throws on a
// seed that is not an integer in [0, 2^32).
export function pickSeed(text, fallback) {
  if (text !== undefined && text !== '') {
    const n = Number(text);
    if (!Number.isInteger(n) || n < 0 || n >= 2 ** 32) {
      throw new Error(`seed ${JSON.stringify(text)}: give an integer in [0, 4294967295]`);
    }
    return n;
  }
  if (fallback !== null) return fallback;
  return Math.floor(Math.random() * 2 ** 32); // printed by the caller, so it can be repeated
}
