#!/usr/bin/env bash
# Starts 5 fresh local redis-server masters and an agent, runs the quick latency bench in
# a few shapes, and tears everything down. Usage: bash bench/run_quick.sh [CYCLES]
set -euo pipefail
cd "$(dirname "$0")/.."
cycles="${1:-2000}"
bin=build/lockwarden
bench=build/bench/lw_bench_latency
[[ -x $bin && -x $bench ]] || { echo "build first: bash .ci/build.sh" >&2; exit 1; }
source bench/lib.sh
bench_init lw-bench
start_masters
${LW_AGENT_WRAPPER:-} $bin serve --socket "$run/agent.sock" "${masters[@]}" --log-level warn --admin-listen off --scan-interval-ms 0 --restart-quarantine false 2>"$run/agent.log" &
agent=$!
pids+=($agent)
until $bin status --socket "$run/agent.sock" >/dev/null 2>&1; do sleep 0.05; done
cpu() { awk '{print $14+$15}' "/proc/$agent/stat"; }
echo "lockwarden quick bench: 5 local masters, $(nproc) cores, $cycles cycles per client"
for shape in "1" "16" "64" "16 contended"; do
  set -- $shape
  before=$(cpu)
  $bench "$run/agent.sock" "$1" "$cycles" "${2:-}"
  after=$(cpu)
  echo "    agent CPU: $(( (after - before) * 10 )) ms"
done
