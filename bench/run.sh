#!/usr/bin/env bash
# The side-by-side benchmark of bench/README.md in one command: the agent (lw_bench), the raw
# pipelined limit (lw_bench_raw), node-redlock with and without ioredis auto-pipelining, etcd's
# Mutex fast path (when etcd-server is installed) and redis-semaphore beside the agent's semaphore
# (bench/node), in the same run on the same 5 fresh local masters, then the hold test and the
# upgrade-in-place test, then a results table with the ratios of issue 21's goals (and issue
# 7's that still apply). Figures only: nothing here asserts a speed.
#
#   bash bench/run.sh            # full run, about 6 minutes
#   bash bench/run.sh --smoke    # everything tiny (CI: keeps it compiling and working)
#   bash bench/run.sh --kinds    # only the agent's mutex, semaphore and read-write parts, ~50 s
#   bash bench/run.sh --fairness [ARGS]  # only bench/fairness.py (issue 34), ~1 min; ARGS go to it
#   bash bench/run.sh --upgrade  # only the upgrade-in-place part (full size), ~1.5 min
#   bash bench/run.sh --tls      # the agent's shapes over plain and TLS (rediss://) to the same
#                                # masters, interleaved: what TLS costs per cycle, ~1 min
#   bash bench/run.sh --scale    # uncontended cycles at C = 1, 8, 64, 512 and 4,096 sessions:
#                                # how cycles/s and CPU per cycle grow, ~1 min
#   bash bench/run.sh --master-cost  # what one acquire or release costs a master, sent as a
#                                # native command, as its own script or batched, ~20 s
# Before its first request, the agent's idle cost is measured (CPU, RSS, what it costs the
# masters). Every run measures the semaphore and read-write kinds beside the mutex, on the same
# agent and masters, and prints their ratios to it: uncontended at C=64 (each client its own
# resource: CPU per cycle), and contended on one resource (16 clients: a semaphore of K=4,
# 15 readers + 1 writer). --kinds runs these six parts only (no idle, raw, node or hold part).
# --fairness runs only the fairness part (3 masters, 3 agents; bench/fairness.py, which starts
# its own): it needs only the agent binary, and writes <out>/fairness.jsonl (BENCH_SECONDS and
# BENCH_WARMUP apply).
#
# LOCKWARDEN_BUILD_DIR   build directory to use (default build/; built with .ci/build.sh if
#                        it is build/, else `cmake --build` of the needed targets)
# LOCKWARDEN_BENCH_NO_BUILD=1  use the binaries as they are (the ctest registration does)
# LOCKWARDEN_BENCH_OUT   where results.md and results.jsonl go (default <build>/bench-results)
# BENCH_SECONDS, BENCH_WARMUP, HOLD_SESSIONS, HOLD_LOCKS, HOLD_TTL_MS, HOLD_SECONDS,
# IDLE_SECONDS, UPGRADE_SESSIONS, UPGRADE_LOCKS, UPGRADE_TTL_MS, UPGRADE_THINK_MS and
# UPGRADE_SECONDS (load before and after the upgrade, each) override the shape sizes.
# BENCH_SEED seeds the node part's random choices (default 1; printed).
#
# Exit status: 0 when every part ran and no cycle failed; 1 otherwise (the table is printed
# either way).
#
# The smoke mode is a test (bench_smoke, also against an ASan-built agent on a loaded 2-core
# machine): it proves that the parts run, and must never fail on speed. So there the agent
# allows a master 500 ms to answer (not 50), every acquire through the agent has a wait (an
# attempt that a slow master made fail is retried, not counted as a failed cycle), and the hold
# uses a 3 s ttl renewed every second, so that a renewal is never late enough to lose a lock.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

smoke=0 kinds_only=0 fairness=0 upgrade_only=0 tls_only=0 scale_only=0 master_cost_only=0
case "${1:-}" in
  --smoke) smoke=1 ;;
  --master-cost) master_cost_only=1 ;;
  --tls) tls_only=1 ;;
  --scale) scale_only=1 ;;
  --kinds) kinds_only=1 ;;
  --upgrade) upgrade_only=1 ;;
  --fairness) fairness=1; shift ;;  # the arguments after it are bench/fairness.py's
  '') ;;
  *) echo "usage: bash bench/run.sh [--smoke | --kinds | --upgrade | --tls | --scale |" \
       "--master-cost |" \
       "--fairness [ARGS]]" >&2
     exit 64 ;;
esac

build=${LOCKWARDEN_BUILD_DIR:-build}
build=$(cd "$(dirname "$build")" && echo "$PWD/$(basename "$build")")
targets=(lockwarden lw_bench lw_bench_raw lw_bench_handover_codec lw_bench_master_cost)
((fairness)) && targets=(lockwarden)
if [[ -z ${LOCKWARDEN_BENCH_NO_BUILD:-} ]]; then
  if [[ $build == "$root/build" ]]; then
    bash .ci/build.sh "${targets[@]}"
  else
    [[ -f $build/CMakeCache.txt ]] || cmake -S . -B "$build" -G Ninja \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOCKWARDEN_WERROR=ON >/dev/null
    cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]}"
  fi
fi
bin=$build/lockwarden
if ((fairness)); then
  [[ -x $bin ]] || { echo "bench/run.sh: $bin missing; build first" >&2; exit 1; }
  exec python3 bench/fairness.py --agent-bin "$bin" \
    --out "${LOCKWARDEN_BENCH_OUT:-$build/bench-results}/fairness.jsonl" \
    ${BENCH_SECONDS:+--seconds "$BENCH_SECONDS"} ${BENCH_WARMUP:+--warmup "$BENCH_WARMUP"} "$@"
fi
bench=$build/bench/lw_bench
raw=$build/bench/lw_bench_raw
master_cost=$build/bench/lw_bench_master_cost
for b in "$bin" "$bench" "$raw" "$build/bench/lw_bench_handover_codec" "$master_cost"; do
  [[ -x $b ]] || { echo "bench/run.sh: $b missing; build first" >&2; exit 1; }
done
build_type=$(grep -m1 '^CMAKE_BUILD_TYPE:' "$build/CMakeCache.txt" | cut -d= -f2)
[[ $build_type == RelWithDebInfo || $build_type == Release ]] ||
  echo "bench/run.sh: warning: $build is a $build_type build; figures mean little" >&2

# node-redlock, pinned in bench/node/package-lock.json; npm ci only when the lockfile changed.
node_dir=bench/node
if ((!upgrade_only && !tls_only && !scale_only && !master_cost_only)); then  # no node needed
  lock_sum=$(sha256sum "$node_dir/package-lock.json" | cut -d' ' -f1)
  stamp=$node_dir/node_modules/.lockwarden-lock.sha256
  if [[ "$(cat "$stamp" 2>/dev/null)" != "$lock_sum" ]]; then
    echo "bench/run.sh: npm ci in $node_dir"
    (cd "$node_dir" && npm ci --no-audit --no-fund >/dev/null)
    echo "$lock_sum" >"$stamp"
  fi
fi

if ((smoke)); then
  seconds=${BENCH_SECONDS:-1} warmup=${BENCH_WARMUP:-0.2}
  hold_sessions=${HOLD_SESSIONS:-20} hold_locks=${HOLD_LOCKS:-10}
  hold_ttl=${HOLD_TTL_MS:-3000} hold_seconds=${HOLD_SECONDS:-4}
  upgrade_sessions=${UPGRADE_SESSIONS:-20} upgrade_locks=${UPGRADE_LOCKS:-10}
  upgrade_ttl=${UPGRADE_TTL_MS:-3000} upgrade_think=${UPGRADE_THINK_MS:-20}
  upgrade_seconds=${UPGRADE_SECONDS:-1}
  idle_seconds=${IDLE_SECONDS:-1}
  # min_ttl_ms must be at least twice node_timeout_ms (the agent checks it).
  agent_timing=(--node-timeout-ms 500 --min-ttl-ms 1000)
  own_wait=(--own-wait-ms 10000) hold_wait=(--wait-ms 10000)
else
  seconds=${BENCH_SECONDS:-5} warmup=${BENCH_WARMUP:-1}
  hold_sessions=${HOLD_SESSIONS:-1000} hold_locks=${HOLD_LOCKS:-100}
  hold_ttl=${HOLD_TTL_MS:-30000} hold_seconds=${HOLD_SECONDS:-30}
  upgrade_sessions=${UPGRADE_SESSIONS:-1000} upgrade_locks=${UPGRADE_LOCKS:-100}
  upgrade_ttl=${UPGRADE_TTL_MS:-30000} upgrade_think=${UPGRADE_THINK_MS:-1000}
  upgrade_seconds=${UPGRADE_SECONDS:-5}
  idle_seconds=${IDLE_SECONDS:-10}
  agent_timing=() own_wait=() hold_wait=()
fi
seed=${BENCH_SEED:-1}

out=${LOCKWARDEN_BENCH_OUT:-$build/bench-results}
mkdir -p "$out"
results=$out/results.jsonl
: >"$results"

source bench/lib.sh
bench_init lw-bench-run
((tls_only)) && bench_tls_files
start_masters
hostports=$(printf '127.0.0.1:%s,' "${ports[@]}")
hostports=${hostports%,}
redis_pids=$(IFS=,; echo "${rpids[*]}")
redis_ports=$(IFS=,; echo "${ports[*]}")

# What start_agent adds: the log level, where the agent's stderr goes, extra flags.
agent_log_level=warn agent_log=$run/agent.log agent_extra=()
# Starts a fresh agent on its own socket; sets agent and admin_port. Waits (60 s at most: an
# ASan build on a loaded machine starts slowly) until it is ready; if it exited meanwhile (the
# admin port picked was taken by then), starts it again on another port, 5 times at most.
start_agent() {
  local sock=$run/agent-$1.sock attempt deadline
  for attempt in 1 2 3 4 5; do
    admin_port=$(free_port)
    # The agent refuses LOCKWARDEN_* variables that are not settings (ours included): it gets
    # none, its whole configuration is on the command line.
    env $(compgen -e | grep '^LOCKWARDEN_' | sed 's/^/-u /') \
      ${LW_AGENT_WRAPPER:-} "$bin" serve --socket "$sock" "${masters[@]}" \
      --log-level "$agent_log_level" --admin-listen "127.0.0.1:$admin_port" \
      --scan-interval-ms 0 --restart-quarantine false "${agent_timing[@]}" \
      "${agent_extra[@]}" 2>>"$agent_log" &
    agent=$!
    pids+=("$agent")
    agent_sock=$sock
    deadline=$((SECONDS + 60))
    while kill -0 "$agent" 2>/dev/null && ((SECONDS < deadline)); do
      # Every master up and usable, not just a quorum: the first part must not meet a master
      # still handshaking.
      "$bin" status --socket "$sock" --json 2>/dev/null | grep -q '"masters_usable": 5' && return 0
      sleep 0.05
    done
    kill -0 "$agent" 2>/dev/null && break  # running but not ready within the deadline
    wait "$agent" 2>/dev/null || true
    echo "bench/run.sh: the agent exited at start (attempt $attempt); trying another port" >&2
  done
  echo "bench/run.sh: the agent did not come up; its log:" >&2
  cat "$agent_log" >&2
  exit 1
}
stop_agent() {
  kill "$agent" 2>/dev/null || true
  wait "$agent" 2>/dev/null || true
  agent=
}
flushall() { for p in "${ports[@]}"; do redis-cli -p "$p" flushall >/dev/null; done; }
# Waits (60 s at most) until the agent sends plain locks as SET NX (lockwarden_native_claims):
# max_ttl_ms after its first heartbeat found every agent marking read holds (docs/safety.md §7).
await_native() {
  local deadline=$((SECONDS + 60))
  until [[ $(metric lockwarden_native_claims) == 1 ]]; do
    ((SECONDS < deadline)) || { echo "bench/run.sh: the agent never went native" >&2; return 1; }
    sleep 0.2
  done
}
metric() {  # sum of the samples whose line starts with $1 (0 when the agent does not answer)
  curl -sf "http://127.0.0.1:$admin_port/metrics" |
    awk -v m="$1" 'index($0, m) == 1 { s += $NF } END { printf "%d", s }' || true
}

failed_parts=()
# Runs one part; its JSON goes to $results. A part that fails is named at the end.
part() {
  local name=$1; shift
  printf '%-34s ' "$name"
  if ! "$@" --label "$name" --json "$results" 2>>"$run/bench.err"; then
    failed_parts+=("$name")
    echo "    ^ failed (exit status); stderr:"
    sed 's/^/    /' "$run/bench.err" | tail -5
  fi
  : >"$run/bench.err"
  flushall
}

# Upgrade in place: a fresh agent, logging at info (its hand-over lines are kept in
# <out>/upgrade-agent.log), limits raised for the sessions and their locks. lw_bench writes the
# new process's pid as soon as it answers; that process is stopped here, not by the old one.
upgrade_part() {
  "$build/bench/lw_bench_handover_codec" "$upgrade_sessions" "$upgrade_locks" | sed 's/^/    /'
  agent_log_level=info agent_log=$run/agent-upgrade.log
  agent_extra=(--max-connections $((upgrade_sessions + 64 > 1024 ? upgrade_sessions + 64 : 1024))
    --max-locks-per-session $((upgrade_locks + 8 > 1024 ? upgrade_locks + 8 : 1024)))
  start_agent upgrade
  part "upgrade" "$bench" --socket "$agent_sock" --agent-pid "$agent" --mode upgrade \
    --sessions "$upgrade_sessions" --locks "$upgrade_locks" --ttl-ms "$upgrade_ttl" \
    --think-ms "$upgrade_think" --before-seconds "$upgrade_seconds" \
    --after-seconds "$upgrade_seconds" --masters "$hostports" --pid-file "$run/upgrade.pid"
  stop_agent  # the old process: exited once it handed over, or still serving if that failed
  if [[ -s $run/upgrade.pid ]]; then
    new_agent=$(cat "$run/upgrade.pid")
    pids+=("$new_agent")
    kill "$new_agent" 2>/dev/null || true
    for _ in $(seq 200); do kill -0 "$new_agent" 2>/dev/null || break; sleep 0.05; done
  fi
  grep -E 'upgrade: |took over from|upgrade failed|cannot take over' "$agent_log" |
    sed 's/^/    agent: /' || true
  cp "$agent_log" "$out/upgrade-agent.log"
  agent_log_level=warn agent_log=$run/agent.log agent_extra=()
}

if ((upgrade_only)); then
  echo "lockwarden upgrade-in-place bench: 5 local masters, $(nproc) cores, $build_type build"
else
  echo "lockwarden side-by-side bench: 5 local masters, $(nproc) cores, $build_type build," \
    "${seconds}s per part (+${warmup}s warmup)$( ((smoke)) && echo ', SMOKE mode'), seed $seed"
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average before: $load_before"

# results.md from the parts run so far (results.py's flags: "$@"), printed; exit 1 if a part
# failed, else 0.
report_and_exit() {
  python3 bench/results.py "$results" "$@" >"$out/results.md"
  echo
  cat "$out/results.md"
  if ((${#failed_parts[@]})); then
    echo "bench/run.sh: FAILED parts: ${failed_parts[*]}" >&2
    exit 1
  fi
  exit 0
}

# TLS: each shape through an agent on the masters' plain ports, then through one on their TLS
# ports (the same redis-server processes), a fresh agent each; the ratios are TLS's cost.
tls_parts() {
  local plain=("${masters[@]}") s shape mode clients transport
  common=(--seconds "$seconds" --warmup-seconds "$warmup" --redis-pids "$redis_pids")
  for s in "c1 uncontended 1" "c64 uncontended 64" "c16-on-1 contended 16"; do
    read -r shape mode clients <<<"$s"
    for transport in plain tls; do
      if [[ $transport == tls ]]; then
        masters=("${tls_masters[@]}") agent_extra=(--redis-tls-ca-file "$tls_ca")
      else
        masters=("${plain[@]}") agent_extra=()
      fi
      start_agent "$shape-$transport"
      part "$shape agent$([[ $transport == tls ]] && echo -tls)" "$bench" --socket "$agent_sock" \
        --agent-pid "$agent" --mode "$mode" --clients "$clients" "${common[@]}" "${own_wait[@]}"
      stop_agent
    done
  done
  masters=("${plain[@]}") agent_extra=()
}

# Scale: the uncontended mutex at C = 1 ... 4,096 sessions, one agent whose connection limit
# is raised above the largest C (and this shell's descriptor limit with it).
scale_parts() {
  ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
  agent_extra=(--max-connections 5000 --heartbeat-ttl-ms 3000 --max-ttl-ms 10000
    --default-ttl-ms 10000)
  start_agent scale
  ((smoke)) || await_native
  common=(--seconds "$seconds" --warmup-seconds "$warmup" --redis-pids "$redis_pids")
  for c in 1 8 64 512 4096; do
    part "scale-c$c agent" "$bench" --socket "$agent_sock" --agent-pid "$agent" \
      --mode uncontended --clients "$c" "${common[@]}" "${own_wait[@]}"
  done
  stop_agent
  agent_extra=()
}

# A mode of one kind of part: what it is ($1), the function that runs its parts ($2) and
# results.py's flag for its table ($3); then the report, and exit.
run_only() {
  echo "lockwarden $1 bench: 5 local masters, $(nproc) cores, $build_type build," \
    "${seconds}s per part (+${warmup}s warmup)"
  "$2"
  report_and_exit "$3" --note "$(date -u +%F), $(nproc) cores, $build_type, \
${seconds} s per part, load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after"
}
# A master's CPU per call, by how the call is sent (bench/master_cost.cc), on master 1 alone.
master_cost_part() {
  local calls=${MASTER_COST_CALLS:-100000} sizes=1,8,32,64
  ((smoke)) && calls=200 sizes=1,8
  "$master_cost" --master "127.0.0.1:${ports[0]}" --calls "$calls" --sizes "$sizes" |
    tee "$out/master-cost.md"
}
if ((master_cost_only)); then
  master_cost_part
  exit 0
fi
((smoke)) && master_cost_part
((scale_only)) && run_only scale scale_parts --scale-only
((tls_only)) && run_only "TLS (the masters' plain and TLS ports)" tls_parts --tls-only
if ((upgrade_only)); then
  upgrade_part
  report_and_exit --upgrade-only --note "$(date -u +%F), $(nproc) cores, \
$build_type, load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after"
fi
# etcd beside the masters, when installed (not in --smoke: CI has no etcd-server).
etcd_endpoints='' etcd_pids=''
if ((!smoke && !kinds_only)) && command -v etcd >/dev/null; then
  start_etcd || etcd_endpoints=''
elif ((!smoke && !kinds_only)); then
  echo "bench/run.sh: etcd-server is not installed; the etcd parts are skipped" >&2
fi
# Plain locks go native max_ttl_ms after every agent marks read holds: 10 s here (the parts'
# ttl), with a heartbeat a second. The smoke mode does not wait (its parts run on the script).
agent_extra=(--heartbeat-ttl-ms 3000 --max-ttl-ms 10000 --default-ttl-ms 10000)
start_agent cycles
agent_extra=()
((smoke)) || await_native
# Idle: the cycles agent, ready (its readiness check is the only request it has served) and
# asked nothing during the window; the masters' CPU and commands are what its health checks
# cost them.
((kinds_only)) || part "idle" python3 bench/idle_cost.py --agent-pid "$agent" \
  --redis-pids "$redis_pids" --redis-ports "$redis_ports" --seconds "$idle_seconds"
common=(--seconds "$seconds" --warmup-seconds "$warmup" --redis-pids "$redis_pids")
# shape name, mode, clients
shapes=("c1 uncontended 1" "c64 uncontended 64" "c16-on-1 contended 16" "mixed64 mixed 64")
((kinds_only)) && shapes=("c64 uncontended 64" "c16-on-1 contended 16")
for s in "${shapes[@]}"; do
  set -- $s
  shape=$1 mode=$2 clients=$3
  part "$shape agent" "$bench" --socket "$agent_sock" --agent-pid "$agent" --mode "$mode" \
    --clients "$clients" "${common[@]}" "${own_wait[@]}"
  ((kinds_only)) && continue
  part "$shape raw" "$raw" --masters "$hostports" --mode "$mode" --clients "$clients" \
    "${common[@]}"
  # The raw loop again, claiming with the agent's own exclusive-acquire script (which also
  # respects readers) instead of SET NX: the same commands the agent sends, with no agent.
  [[ $mode == uncontended ]] && part "$shape raw-script" "$raw" --masters "$hostports" \
    --mode "$mode" --clients "$clients" "${common[@]}" --claim script
  part "$shape node" node "$node_dir/redlock_bench.mjs" --masters "$hostports" --mode "$mode" \
    --clients "$clients" "${common[@]}" --seed "$seed"
  part "$shape node-autopipe" node "$node_dir/redlock_bench.mjs" --masters "$hostports" \
    --mode "$mode" --clients "$clients" "${common[@]}" --seed "$seed" --autopipeline
  # etcd (issue 37): concurrency.Mutex's fast path on 3 members, when etcd-server is installed.
  if [[ -n $etcd_endpoints && $shape != mixed64 ]]; then
    part "$shape etcd" node "$node_dir/etcd_bench.mjs" --endpoints "$etcd_endpoints" \
      --mode "$mode" --clients "$clients" --seconds "$seconds" --warmup-seconds "$warmup" \
      --etcd-pids "$etcd_pids" --seed "$seed"
  fi
done
# The other kinds (issue 18) on the same agent. Uncontended, beside the mutex's c64: each of 64
# clients its own semaphore of 4 permits (bench/semu/u<i>), or its own read-write lock, held
# shared (bench/rwu/u<i>); what a cycle of each kind costs the agent and the masters.
part "sem-c64 agent" "$bench" --socket "$agent_sock" --agent-pid "$agent" --mode uncontended \
  --clients 64 --permits 4 --prefix bench/semu/ "${common[@]}" "${own_wait[@]}"
# redis-semaphore's RedlockSemaphore on the same masters and shape (issue 37).
((kinds_only)) || part "sem-c64 redis-semaphore" node "$node_dir/semaphore_bench.mjs" \
  --masters "$hostports" --mode uncontended --clients 64 --permits 4 --prefix bench/semu/ \
  "${common[@]}" --seed "$seed"
part "rw-c64 agent" "$bench" --socket "$agent_sock" --agent-pid "$agent" --mode uncontended \
  --clients 64 --shared-clients 64 --prefix bench/rwu/ "${common[@]}" "${own_wait[@]}"
# Contended, beside the mutex's c16-on-1: a semaphore of 4 permits with 16 clients, a
# read-write lock with 15 readers and 1 writer; one resource each.
part "sem4-c16 agent" "$bench" --socket "$agent_sock" --agent-pid "$agent" --mode contended \
  --clients 16 --permits 4 --prefix bench/sem/ "${common[@]}"
((kinds_only)) || part "sem4-c16 redis-semaphore" node "$node_dir/semaphore_bench.mjs" \
  --masters "$hostports" --mode contended --clients 16 --permits 4 --prefix bench/sem/ \
  "${common[@]}" --seed "$seed"
part "rw15+1 agent" "$bench" --socket "$agent_sock" --agent-pid "$agent" --mode contended \
  --clients 16 --shared-clients 15 --prefix bench/rw/ "${common[@]}"
stop_agent
# The agent as before issue 37 (mark_readers = false: every exclusive acquire the claim script),
# on its own once the native one has left the registry: what native claims change.
if ((!kinds_only)); then
  agent_extra=(--mark-readers false)
  start_agent cycles-script
  agent_extra=()
  for s in "c1 uncontended 1" "c64 uncontended 64"; do
    set -- $s
    part "$1 agent-script" "$bench" --socket "$agent_sock" --agent-pid "$agent" --mode "$2" \
      --clients "$3" "${common[@]}" "${own_wait[@]}"
  done
  stop_agent
fi

if ((kinds_only)); then
  report_and_exit --kinds-only --note "$(date -u +%F), $(nproc) cores, \
$build_type, ${seconds} s per part, load average $load_before before, \
$(cut -d' ' -f1-3 /proc/loadavg) after"
fi

# Hold: a fresh agent, so its RSS is the hold's alone.
start_agent hold
renewals_before=$(metric 'lockwarden_renewals_total{outcome="extended"}')
retries_before=$(metric 'lockwarden_renewals_total{outcome="retry"}')
part "hold" "$bench" --socket "$agent_sock" --agent-pid "$agent" --mode hold \
  --sessions "$hold_sessions" --locks "$hold_locks" --ttl-ms "$hold_ttl" \
  --seconds "$hold_seconds" --masters "$hostports" "${hold_wait[@]}"
renewed=$(($(metric 'lockwarden_renewals_total{outcome="extended"}') - renewals_before))
retried=$(($(metric 'lockwarden_renewals_total{outcome="retry"}') - retries_before))
echo "{\"label\":\"hold-metrics\",\"renewals_extended\":$renewed,\"renewals_retry\":$retried}" \
  >>"$results"
printf '%-34s agent metrics: %s renewals extended, %s retried\n' "" "$renewed" "$retried"
stop_agent

upgrade_part
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average after: $load_after"

python3 bench/results.py "$results" --smoke "$smoke" --note "$(date -u +%F), $(nproc) cores, \
$build_type, ${seconds} s per part, load average $load_before before, $load_after after" \
  >"$out/results.md"
echo
cat "$out/results.md"
echo
echo "results: $out/results.md, $out/results.jsonl"
if [[ -s $run/agent.log ]]; then
  echo "agent log ($(wc -l <"$run/agent.log") lines, warn and above), first lines:"
  head -5 "$run/agent.log"
fi
if ((${#failed_parts[@]})); then
  echo "bench/run.sh: FAILED parts: ${failed_parts[*]}" >&2
  exit 1
fi
