#!/usr/bin/env bash
# The burst and hold of issue 36, run several times against one or two agent binaries,
# interleaved (A B A B ...), each run on five fresh masters and a fresh agent with default
# settings (fleet presence on; only --restart-quarantine false, as the masters are fresh):
# lw_bench --mode hold (1,000 sessions x 100 renewed locks, wait_ms 0, 256 in flight, held
# 30 s), while an operator's page is open: /api/v1/state read every second and /api/v1/fleet
# every 5 s, each read timed. Not part of the gate; run it on a quiet machine.
#
#   bash bench/hold_runs.sh [BINARY_A [BINARY_B]]   (default: build/lockwarden)
#   HOLD_RUNS=10 HOLD_SESSIONS=1000 HOLD_LOCKS=100 HOLD_SECONDS=30 HOLD_PAGE=1 (0: no reads)
#
# Prints one line per run: binary, acquired, failed (by code), acquire time and p99, agent RSS
# at the end and its peak, the loop's lag p99 and max from /metrics (binaries that export
# lockwarden_loop_lag_seconds), and the slowest state and fleet reads with their failures.
# Raw results: $HOLD_OUT (default /tmp/hold_runs.jsonl).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh

bins=("${@:-build/lockwarden}")
runs=${HOLD_RUNS:-10} sessions=${HOLD_SESSIONS:-1000} locks=${HOLD_LOCKS:-100}
seconds=${HOLD_SECONDS:-30} page=${HOLD_PAGE:-1} out=${HOLD_OUT:-/tmp/hold_runs.jsonl}
bench=build/bench/lw_bench
[[ -x $bench ]] || { echo "build first: bash .ci/build.sh lw_bench" >&2; exit 1; }
: >"$out"

# Reads $1 (a path of the admin API) every $2 s until the file $3 exists; one line per read:
# "<seconds> <http status>".
poll() {
  local path=$1 every=$2 stop=$3
  while [[ ! -e $stop ]]; do
    curl -s -o /dev/null -m 30 -w '%{time_total} %{http_code}\n' \
      "http://127.0.0.1:$admin_port$path" || echo "30 000"
    sleep "$every"
  done
}

# The loop lag's p99 and max in a /metrics text ($1), in ms, as the upper bounds of their
# buckets ("-" when the binary exports no such histogram).
lag_figures() {
  python3 - "$1" <<'PY'
import math, re, sys
text = open(sys.argv[1]).read()
buckets = [(float('inf') if le == '+Inf' else float(le), float(v)) for le, v in
           re.findall(r'^lockwarden_loop_lag_seconds_bucket\{le="([^"]+)"\} (\S+)$', text, re.M)]
if not buckets or buckets[-1][1] == 0:
    print('- -'); sys.exit()
total = buckets[-1][1]
p99 = next(le for le, c in buckets if c >= 0.99 * total)  # the bucket's upper bound
top = next(le for le, c in buckets if c >= total)  # the max is at most this bound
print(f'{p99*1e3:.1f} {"inf" if math.isinf(top) else f"{top*1e3:.1f}"}')
PY
}

one_run() {
  local bin=$1 n=$2
  bench_init hold-run
  start_masters
  admin_port=$(free_port)
  local sock=$run/agent.sock
  env $(compgen -e | grep '^LOCKWARDEN_' | sed 's/^/-u /') "$bin" serve --socket "$sock" \
    "${masters[@]}" --admin-listen "127.0.0.1:$admin_port" --restart-quarantine false \
    2>"$run/agent.log" &
  agent=$!
  pids+=("$agent")
  local deadline=$((SECONDS + 60))
  until "$bin" status --socket "$sock" --json 2>/dev/null | grep -q '"masters_usable": 5'; do
    ((SECONDS < deadline)) || { echo "agent did not come up" >&2; return 1; }
    sleep 0.05
  done
  local hostports
  hostports=$(printf '127.0.0.1:%s,' "${ports[@]}")
  if ((page)); then
    poll /api/v1/state 1 "$run/stop" >"$run/state.reads" &
    pids+=($!)
    poll /api/v1/fleet 5 "$run/stop" >"$run/fleet.reads" &
    pids+=($!)
  fi
  "$bench" --socket "$sock" --agent-pid "$agent" --mode hold --sessions "$sessions" \
    --locks "$locks" --ttl-ms 30000 --seconds "$seconds" --masters "${hostports%,}" \
    --label "$bin" --json "$run/hold.json" >"$run/bench.log" 2>&1 || true
  curl -s "http://127.0.0.1:$admin_port/metrics" >"$run/metrics.txt" || true
  touch "$run/stop"
  sleep 1
  local lag reads=""
  lag=$(lag_figures "$run/metrics.txt")
  for f in state fleet; do
    [[ -s $run/$f.reads ]] || continue
    reads+=" $f $(awk '{ if ($1 > m) m = $1; if ($2 != 200) bad++ } END { printf "max %.2fs, %d not 200 of %d", m, bad, NR }' "$run/$f.reads")"
  done
  if [[ ! -s $run/hold.json ]]; then
    echo "run $n $bin: no result from lw_bench; its last lines, then the agent's:"
    tail -5 "$run/bench.log"
    tail -5 "$run/agent.log"
    kill -0 "$agent" 2>/dev/null || echo "(the agent is no longer running)"
    bench_cleanup
    trap - EXIT
    return 0
  fi
  python3 - "$run/hold.json" "$bin" "$n" "$lag" "$reads" "$out" <<'PY'
import json, sys
path, binary, n, lag, reads, out = sys.argv[1:]
r = json.loads(open(path).read().splitlines()[-1])
codes = {k[len('acquire_failed_'):]: int(v) for k, v in r.items() if k.startswith('acquire_failed_')}
lag_p99, lag_max = lag.split()
r.update(run=int(n), binary=binary, lag_p99_ms=lag_p99, lag_max_ms=lag_max, reads=reads.strip())
open(out, 'a').write(json.dumps(r) + '\n')
print(f"run {n} {binary}: acquired {int(r['acquired'])}, failed {int(r['acquire_failed'])} {codes or ''}, "
      f"{r['acquire_seconds']} s (p99 {r['acquire_us_p99'] / 1000:.1f} ms), RSS end "
      f"{r['rss_hold_end_kib'] / 1024:.1f} MiB peak {r['hwm_kib'] / 1024:.1f} MiB, loop lag p99 "
      f"{lag_p99} ms max <= {lag_max} ms;{reads}")
PY
  bench_cleanup
  trap - EXIT
}

echo "hold_runs: ${#bins[@]} binary(ies) x $runs runs, $sessions x $locks locks, ${seconds}s" \
  "hold, page reads $page; load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((n = 1; n <= runs; n++)); do
  for bin in "${bins[@]}"; do one_run "$bin" "$n"; done
done
echo "hold_runs: load $(cut -d' ' -f1-3 /proc/loadavg); raw results in $out"
