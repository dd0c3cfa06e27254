#!/usr/bin/env bash
# What an open operator page costs: the size and latency of GET /api/v1/state with many locks
# held, and the lock throughput with no page, with 5 pages open (each polls once a second, and
# keeps the presence probe running), and with 4 clients polling the state flat out.
#
#   bash bench/page_impact.sh [HELD_LOCKS] [CYCLES]      defaults: 1000 held, 2000 cycles/client
#
# Figures only; the three throughput runs are taken in the same agent, one after the other.
set -euo pipefail
cd "$(dirname "$0")/.."
held="${1:-1000}"
cycles="${2:-2000}"
bin=build/lockwarden
bench=build/bench/lw_bench_latency
[[ -x $bin && -x $bench ]] || { echo "build first: bash .ci/build.sh" >&2; exit 1; }
source bench/lib.sh
bench_init lw-page-bench
start_masters
admin=$(free_port)
$bin serve --socket "$run/agent.sock" "${masters[@]}" --log-level warn \
  --admin-listen "127.0.0.1:$admin" --scan-interval-ms 0 --restart-quarantine false \
  2>"$run/agent.log" &
agent=$!
pids+=($agent)
until $bin status --socket "$run/agent.sock" >/dev/null 2>&1; do sleep 0.05; done

# One connection holding $held renewed locks for the whole run.
python3 - "$run/agent.sock" "$held" "$run/holder.ready" <<'PY' &
import json, socket, sys, time
path, n, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_UNIX); s.connect(path)
f = s.makefile("rw")
for i in range(n):
    f.write(json.dumps({"id": i, "op": "acquire", "resource": f"held:{i}", "ttl_ms": 60000,
                        "wait_ms": 5000, "renew": True}) + "\n")
f.flush()
got = 0
while got < n:
    reply = json.loads(f.readline())
    if "id" in reply:
        assert reply.get("ok"), reply
        got += 1
open(ready, "w").close()
time.sleep(3600)
PY
pids+=($!)
until [[ -e $run/holder.ready ]]; do sleep 0.05; done
url="http://127.0.0.1:$admin/api/v1/state"
until [[ $(curl -s "$url" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["locks"]))') == "$held" ]]; do
  sleep 0.1
done

echo "lockwarden page bench: 5 local masters, $(nproc) cores, $held locks held, $cycles cycles per client"
bytes=$(curl -s "$url" | wc -c)
times=$(for _ in $(seq 20); do curl -s -o /dev/null -w '%{time_total}\n' "$url"; done | sort -n)
median=$(echo "$times" | sed -n 10p)
echo "GET /api/v1/state: $((bytes / 1024)) KiB, median $(awk -v t="$median" 'BEGIN{printf "%.1f", t*1000}') ms over 20 requests"

cpu() { awk '{print $14+$15}' "/proc/$agent/stat"; }
shape() {  # $1 = label
  local before after out
  before=$(cpu)
  out=$($bench "$run/agent.sock" 16 "$cycles")
  after=$(cpu)
  echo "  $1: $(echo "$out" | head -1)"
  echo "    agent CPU: $(( (after - before) * 10 )) ms"
  echo "$out" | grep -o '[0-9.]* cycles/s' | head -1 | cut -d' ' -f1 >"$run/rate"
}
stop_pollers() { for p in "${pollers[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pollers=(); }
pollers=()

shape "no page open"
base=$(<"$run/rate")
for _ in 1 2 3 4 5; do
  (while true; do curl -s -o /dev/null "$url"; sleep 1; done) &
  pollers+=($!)
done
shape "5 pages open (1 poll/s each)"
pages=$(<"$run/rate")
stop_pollers
for _ in 1 2 3 4; do
  (while true; do curl -s -o /dev/null "$url"; done) &
  pollers+=($!)
done
shape "4 clients polling flat out"
flat=$(<"$run/rate")
stop_pollers
awk -v b="$base" -v p="$pages" -v f="$flat" \
  'BEGIN { printf "throughput vs no page: 5 pages x%.2f, flat-out polling x%.2f\n", p/b, f/b }'
