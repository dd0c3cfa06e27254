// What the checks share: times and windows of the safety run's records (analysis.mjs,
// elections.mjs). Every time is µs on CLOCK_MONOTONIC.

export const ms = (us) => us / 1000;
// Seconds since the run's start, for the texts.
export const sec = (h, us) => ((us - h.t0) / 1e6).toFixed(3);

export function groupBy(items, key) {
  const groups = new Map();
  for (const item of items) {
    const k = key(item);
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(item);
  }
  return groups;
}

// The first index in sorted (ascending by key) whose key is >= x.
export function lowerBound(sorted, x, key = (v) => v) {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (key(sorted[mid]) < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// The end of a grant's window: it stops counting at its exit or at the end of its validity,
// whichever comes first (a client stopped past its validity no longer holds the lock).
export const windowEnd = (g) => Math.min(g.t_exit ?? g.validity_end, g.validity_end);

// Sweeps one resource's grants in t_granted order, keeping the window that reaches furthest:
// calls overlap(g, reach) for each grant granted before that window ended.
export function sweepOverlaps(grants, overlap) {
  let reach = null;
  for (const g of [...grants].sort((a, b) => a.t_granted - b.t_granted)) {
    if (reach && g.t_granted < windowEnd(reach)) overlap(g, reach);
    if (!reach || windowEnd(g) > windowEnd(reach)) reach = g;
  }
}
