#!/usr/bin/env bash
# The fleet view's costs (docs/fleet.md, "Costs"; bench/README.md, "Fleet view cost"). Figures,
# never assertions; not part of the test command.
#
#   bash bench/fleet/run.sh [heartbeat] [read] [graph]     (default: all three)
#
# heartbeat: one fresh master, FLEET_AGENTS (1000) simulated agents each sending the presence
#   heartbeat pipeline every heartbeat_ttl/3 (bench/fleet/heartbeat_load.py): the master's CPU,
#   commands/s and memory per agent. Needs no lockwarden code.
# read: 5 fresh masters holding 1k, 10k, 100k lock keys (FLEET_LOCKS) with fleet lock values and
#   FLEET_READ_AGENTS (5) agents' registry entries and reports (bench/fleet/fill_locks.py |
#   redis-cli --pipe), then one whole fleet view each by build/bench/lw_bench_fleet_read
#   (FleetReader; a sweep of reads of FLEET_READ_BUDGET (250000) keys walked each): its time,
#   reads and memory, and each master's CPU (INFO used_cpu_sys + used_cpu_user, before and after).
# graph: what the wait-for graph adds to building a view of GRAPH_LOCKS (100000) reported holds
#   with GRAPH_WAITERS (10000) waiters, in memory (build/bench/lw_bench_wait_graph; no masters).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/bench/fleet
source "$ROOT/bench/lib.sh"
BUILD=${LOCKWARDEN_BUILD_DIR:-$ROOT/build}
parts=("$@")
((${#parts[@]})) || parts=(heartbeat read graph)

cpu_of() {  # cpu_of PORT: the master's used_cpu_sys + used_cpu_user, seconds
  redis-cli -p "$1" info cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.3f", s }'
}

bench_init lw-fleet-bench
start_masters

for part in "${parts[@]}"; do
  case $part in
  heartbeat)
    echo "== heartbeat: ${FLEET_AGENTS:-1000} agents on master 127.0.0.1:${ports[0]} ($(redis-server --version | cut -d' ' -f3))"
    redis-cli -p "${ports[0]}" flushall >/dev/null
    python3 "$HERE/heartbeat_load.py" --port "${ports[0]}" --agents "${FLEET_AGENTS:-1000}" \
      --seconds "${FLEET_SECONDS:-60}"
    ;;
  read)
    [[ -x $BUILD/bench/lw_bench_fleet_read ]] ||
      cmake --build "$BUILD" --target lw_bench_fleet_read
    list=$(printf '127.0.0.1:%s,' "${ports[@]}")
    for n in ${FLEET_LOCKS:-1000 10000 100000}; do
      for p in "${ports[@]}"; do
        redis-cli -p "$p" flushall >/dev/null
        python3 "$HERE/fill_locks.py" --locks "$n" --agents "${FLEET_READ_AGENTS:-5}" |
          redis-cli -p "$p" --pipe >/dev/null
      done
      before=()
      for p in "${ports[@]}"; do before+=("$(cpu_of "$p")"); done
      out=$("$BUILD/bench/lw_bench_fleet_read" --masters "${list%,}" \
        --read-budget "${FLEET_READ_BUDGET:-250000}")
      cpu=""
      for i in "${!ports[@]}"; do
        cpu+=$(awk -v a="${before[$i]}" -v b="$(cpu_of "${ports[$i]}")" 'BEGIN { printf "%.3f ", b - a }')
      done
      echo "== read: $n locks of ${FLEET_READ_AGENTS:-5} agents on 5 masters: $out; master CPU s: $cpu"
    done
    ;;
  graph)
    [[ -x $BUILD/bench/lw_bench_wait_graph ]] ||
      cmake --build "$BUILD" --target lw_bench_wait_graph
    echo "== graph: $("$BUILD/bench/lw_bench_wait_graph" --locks "${GRAPH_LOCKS:-100000}" \
      --waiters "${GRAPH_WAITERS:-10000}")"
    ;;
  *) echo "unknown part $part (heartbeat, read, graph)" >&2; exit 64 ;;
  esac
done
