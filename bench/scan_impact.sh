#!/usr/bin/env bash
# What the leak scanner costs: fills 5 fresh local redis-server masters with KEYS_PER_MASTER keys
# each (all with a TTL, so a scan finds nothing but 3 planted leaks), measures the one-shot
# `lockwarden scan` throughput, then runs the latency bench against an agent with the scanner
# off, scanning flat out, and scanning at the default budget. Figures, never assertions.
# Usage: bash bench/scan_impact.sh [KEYS_PER_MASTER=1000000] [CYCLES=2000]
set -euo pipefail
cd "$(dirname "$0")/.."
keys="${1:-1000000}"
cycles="${2:-2000}"
[[ $keys =~ ^[0-9]+$ && $cycles =~ ^[0-9]+$ && $keys -gt 0 && $cycles -gt 0 ]] || {
  echo "usage: bash bench/scan_impact.sh [KEYS_PER_MASTER] [CYCLES]" >&2
  exit 64
}
[[ -x build/lockwarden && -x build/bench/lw_bench_latency ]] || {
  echo "build first: bash .ci/build.sh" >&2
  exit 1
}
source bench/lib.sh
bench_init lw-scan-impact
# Private copies: a concurrent rebuild must not swap the binaries in the middle of the run.
cp build/lockwarden build/bench/lw_bench_latency "$run/"
bin=$run/lockwarden
bench=$run/lw_bench_latency

tck=$(getconf CLK_TCK)
cpu_ms() { awk -v t="$tck" '{print int(($14+$15)*1000/t)}' "/proc/$1/stat"; }
rss_mb() { awk '/^VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b+0 == 0) print "-"; else printf "%.2f", a/b }'; }

# ---- 1. masters ---------------------------------------------------------------------------------
start_masters
redis_cpu_all() { local s=0 p; for p in "${rpids[@]}"; do s=$((s + $(cpu_ms "$p"))); done; echo $s; }
echo "lockwarden scan impact: 5 local masters, $keys keys per master, $(nproc) cores," \
  "$cycles cycles per client"
echo "(figures are noisy if anything else runs on these cores)"

# ---- 2. fill ------------------------------------------------------------------------------------
fill='for i=tonumber(ARGV[1]),tonumber(ARGV[2]) do redis.call("SET","fill:"..i,"x","EX",86400) end return 1'
chunk=100000
t0=$(now)
fillers=()
for port in "${ports[@]}"; do
  (
    for ((start = 0; start < keys; start += chunk)); do
      end=$((start + chunk - 1 < keys - 1 ? start + chunk - 1 : keys - 1))
      redis-cli -p "$port" EVAL "$fill" 0 "$start" "$end" >/dev/null
    done
  ) &
  fillers+=($!)
done
for p in "${fillers[@]}"; do wait "$p"; done
t1=$(now)
for i in 1 2 3; do redis-cli -p "${ports[0]}" SET "lock:leak-$i" x >/dev/null; done
total=0
for port in "${ports[@]}"; do total=$((total + $(redis-cli -p "$port" DBSIZE))); done
mem=$(redis-cli -p "${ports[0]}" INFO memory | awk -F: '/^used_memory_human/ {print $2}' | tr -d '\r')
echo
echo "== fill"
echo "  $total keys on 5 masters in $(elapsed "$t0" "$t1") s" \
  "(EVAL chunks of $chunk, masters filled in parallel); master 1 uses $mem;" \
  "3 TTL-less lock:leak-N keys planted on master 1"

# ---- 3. one-shot scan throughput ----------------------------------------------------------------
summarize() {
  awk '/ scanned [0-9]+ key\(s\) in / {
         n = $3; s = $(NF-1); printf "  %-22s %9d keys %7.2f s %10.0f keys/s\n", $1, n, s, (s > 0 ? n/s : 0)
         tn += n; ts += s }
       END { printf "  %-22s %9d keys %7.2f s %10.0f keys/s (masters are scanned one after another)\n",
                    "all masters", tn, ts, (ts > 0 ? tn/ts : 0) }' "$1"
}
echo
echo "== one-shot scan: lockwarden scan --scan-pattern '*' --scan-keys-per-second 10000000"
r0=$(redis_cpu_all)
rc=0
/usr/bin/time -f '%e %U %S' -o "$run/scan.time" \
  "$bin" scan "${masters[@]}" --scan-pattern '*' --scan-keys-per-second 10000000 \
  --log-level warn >"$run/scan.out" 2>"$run/scan.err" || rc=$?
r1=$(redis_cpu_all)
sed 's/^/  | /' "$run/scan.out"
[[ -s $run/scan.err ]] && sed 's/^/  stderr: /' "$run/scan.err"
read -r wall user sys < <(tail -n 1 "$run/scan.time")
summarize "$run/scan.out"
leaks=$(grep -c ' no_ttl .*lock:leak-' "$run/scan.out" || true)
echo "  exit code $rc (1 = keys without TTL found); planted leaks reported: $leaks of 3"
echo "  CPU: scan process $(awk -v u="$user" -v s="$sys" 'BEGIN{printf "%.2f", u+s}') s" \
  "(wall $wall s), 5 redis-servers $(awk -v a="$r0" -v b="$r1" 'BEGIN{printf "%.2f", (b-a)/1000}') s"
awk -v k="$keys" 'BEGIN { printf "  at the default budget (20000 keys/s per master) a pass would take" \
  " %.0f s per master, %.0f s for all 5\n", k/20000, 5*k/20000 }'

echo
echo "== one-shot scan, lock:* only, unlimited budget: how fast SCAN walks keys that do not match"
r0=$(redis_cpu_all)
rc=0
/usr/bin/time -f '%e %U %S' -o "$run/scan2.time" "$bin" scan "${masters[@]}" --log-level warn \
  --scan-keys-per-second 10000000 \
  >"$run/scan2.out" 2>"$run/scan2.err" || rc=$?
r1=$(redis_cpu_all)
[[ -s $run/scan2.err ]] && sed 's/^/  stderr: /' "$run/scan2.err"
summarize "$run/scan2.out"
read -r wall user sys < <(tail -n 1 "$run/scan2.time")
leaks=$(grep -c ' no_ttl .*lock:leak-' "$run/scan2.out" || true)
echo "  exit code $rc; planted leaks reported: $leaks of 3"
echo "  CPU: scan process $(awk -v u="$user" -v s="$sys" 'BEGIN{printf "%.2f", u+s}') s" \
  "(wall $wall s), 5 redis-servers $(awk -v a="$r0" -v b="$r1" 'BEGIN{printf "%.2f", (b-a)/1000}') s"
awk -v k="$keys" '/ scanned [0-9]+ key\(s\) in / { ts += $(NF-1) }
  END { if (ts > 0) printf "  SCAN walked the %d keys per master at %.0f keys/s per master\n", k, 5*k/ts }' "$run/scan2.out"
echo "  (the budget paces the keys SCAN walks, matched or not: at the default 20000 keys/s this"
echo "   lock:* pass would take $((keys / 20000)) s per master)"

# ---- 4. latency with and without the scanner ----------------------------------------------------
admin_port=
start_agent() {
  local admin=$1
  shift
  "$bin" serve --socket "$run/agent.sock" "${masters[@]}" --log-level warn --admin-listen "$admin" \
    --restart-quarantine false "$@" 2>>"$run/agent.log" &
  agent=$!
  local tries=0
  until "$bin" status --socket "$run/agent.sock" >/dev/null 2>&1; do
    sleep 0.05
    tries=$((tries + 1))
    ((tries < 200)) || { echo "agent did not start" >&2; cat "$run/agent.log" >&2; exit 1; }
  done
}
stop_agent() {
  kill "$agent"
  wait "$agent" || true
  agent=
  rm -f "$run/agent.sock"
}
scanned() {  # sum of lockwarden_scan_keys_scanned_total over the masters (0 when admin is off)
  [[ -n $admin_port ]] || { echo 0; return; }
  curl -s "127.0.0.1:$admin_port/metrics" |
    awk '/^lockwarden_scan_keys_scanned_total/ {s += $NF} END {printf "%d", s}'
}
declare -A cps p50 p99 agent_cpu m1_cpu all_cpu scan_keys scan_rate
configs=(baseline flatout default)
shapes=(1 16)
label_baseline="scanner off (--scan-interval-ms 0)"
label_flatout="scanner flat out (--scan-interval-ms 100 --scan-pattern '*' --scan-keys-per-second 10000000)"
label_default="scanner default budget (--scan-interval-ms 100 --scan-pattern '*', 20000 keys/s)"

for cfg in "${configs[@]}"; do
  label=label_$cfg
  echo
  echo "== ${!label}"
  case $cfg in
    baseline)
      admin_port=
      start_agent off --scan-interval-ms 0
      ;;
    flatout)
      admin_port=$(free_port)
      start_agent "127.0.0.1:$admin_port" --scan-interval-ms 100 --scan-pattern '*' \
        --scan-keys-per-second 10000000
      ;;
    default)
      admin_port=$(free_port)
      start_agent "127.0.0.1:$admin_port" --scan-interval-ms 100 --scan-pattern '*'
      ;;
  esac
  if [[ -n $admin_port ]]; then
    # Wait until the scanner is walking the keyspace ("*"), not just starting up.
    tries=0
    until (($(scanned) >= 2000)); do
      sleep 0.1
      tries=$((tries + 1))
      ((tries < 300)) || { echo "  scanner did not start scanning within 30 s" >&2; break; }
    done
  fi
  echo "  agent RSS at start of runs: $(rss_mb "$agent") MB"
  for shape in "${shapes[@]}"; do
    k=$cfg,$shape
    a0=$(cpu_ms "$agent") m0=$(cpu_ms "${rpids[0]}") r0=$(redis_cpu_all) s0=$(scanned) t0=$(now)
    out=$("$bench" "$run/agent.sock" "$shape" "$cycles" 2>&1) || true
    t1=$(now) s1=$(scanned) r1=$(redis_cpu_all) m1=$(cpu_ms "${rpids[0]}") a1=$(cpu_ms "$agent")
    echo "  $out"
    cps[$k]=$(sed -n 's/.* \([0-9][0-9]*\) cycles\/s.*/\1/p' <<<"$out")
    p50[$k]=$(sed -n 's/.* p50=\([0-9][0-9]*\).*/\1/p' <<<"$out")
    p99[$k]=$(sed -n 's/.* p99=\([0-9][0-9]*\).*/\1/p' <<<"$out")
    agent_cpu[$k]=$((a1 - a0))
    m1_cpu[$k]=$((m1 - m0))
    all_cpu[$k]=$((r1 - r0))
    scan_keys[$k]=$((s1 - s0))
    scan_rate[$k]=$(awk -v n="$((s1 - s0))" -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", n/(b-a)}')
    echo "    wall $(elapsed "$t0" "$t1") s; CPU: agent ${agent_cpu[$k]} ms, redis master 1" \
      "${m1_cpu[$k]} ms, all 5 redis ${all_cpu[$k]} ms; keys scanned meanwhile" \
      "${scan_keys[$k]} (${scan_rate[$k]} keys/s)"
  done
  if [[ -n $admin_port ]]; then
    curl -s "127.0.0.1:$admin_port/metrics" | grep '^lockwarden_scan_keys_scanned_total' |
      sed 's/^/    /'
    errs=$(curl -s "127.0.0.1:$admin_port/metrics" |
      awk '/^lockwarden_scan_errors_total/ {s += $NF} END {printf "%d", s}')
    echo "    scan errors: $errs"
  fi
  echo "  agent RSS at end of runs: $(rss_mb "$agent") MB"
  stop_agent
done

# ---- summary ------------------------------------------------------------------------------------
echo
echo "== summary (ratio = value / scanner off; cycles/s higher is better, latency lower is better)"
printf "  %-7s %-9s %9s %6s %7s %6s %7s %6s %9s %8s %8s %11s\n" shape config cycles/s ratio \
  p50us ratio p99us ratio agent_ms m1_ms redis_ms scanned/s
for shape in "${shapes[@]}"; do
  b=baseline,$shape
  for cfg in "${configs[@]}"; do
    k=$cfg,$shape
    printf "  %-7s %-9s %9s %6s %7s %6s %7s %6s %9s %8s %8s %11s\n" "$shape cl" "$cfg" \
      "${cps[$k]}" "$(div "${cps[$k]}" "${cps[$b]}")" \
      "${p50[$k]}" "$(div "${p50[$k]}" "${p50[$b]}")" \
      "${p99[$k]}" "$(div "${p99[$k]}" "${p99[$b]}")" \
      "${agent_cpu[$k]}" "${m1_cpu[$k]}" "${all_cpu[$k]}" "${scan_rate[$k]}"
  done
done
echo "  agent_ms: agent CPU during the run (scanner thread included); m1_ms: redis master 1;"
echo "  redis_ms: all 5 redis-servers; scanned/s: lockwarden_scan_keys_scanned_total rate"
other=$(grep -v 'leak scan: no_ttl key on .*lock:leak-' "$run/agent.log" || true)
if [[ -n $other ]]; then
  echo
  echo "== agent log (besides the planted leaks)"
  sed 's/^/  /' <<<"$other" | head -20
fi
