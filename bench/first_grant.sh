#!/usr/bin/env bash
# How long a brand-new deployment waits for its first lock: 5 freshly started redis-server
# masters, `lockwarden serve` with default settings (only the socket path moved into a
# temporary directory and the admin listener off, so it runs beside anything), and
# `lockwarden lock` asked at once. Prints the seconds from serve to the first grant; the wait
# is the restart quarantine of fresh masters (max_ttl_ms, docs/safety.md §3). Measures, never
# asserts.
#
#   bash bench/first_grant.sh [lockwarden-binary]    # default build/lockwarden
#   LOCKWARDEN_FIRST_GRANT_PORT=7401                 # first of the 5 master ports
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=$(realpath "${1:-build/lockwarden}")
base=${LOCKWARDEN_FIRST_GRANT_PORT:-7401}
dir=$(mktemp -d)
agent=
cleanup() {
  [[ -n $agent ]] && kill "$agent" 2>/dev/null && wait "$agent" 2>/dev/null
  for ((i = 0; i < 5; i++)); do redis-cli -p $((base + i)) shutdown nosave >/dev/null 2>&1 || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
masters=()
for ((i = 0; i < 5; i++)); do
  port=$((base + i))
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --logfile "$dir/redis-$port.log" --dir "$dir"
  masters+=(--master "redis://127.0.0.1:$port")
done
for ((i = 0; i < 5; i++)); do
  for ((t = 0; t < 100; t++)); do redis-cli -p $((base + i)) ping >/dev/null 2>&1 && break; sleep 0.05; done
done
start=$(date +%s%N)
"$bin" serve --socket "$dir/agent.sock" --admin-listen off "${masters[@]}" >"$dir/agent.log" 2>&1 &
agent=$!
for ((t = 0; t < 1000; t++)); do [[ -S $dir/agent.sock ]] && break; sleep 0.01; done
"$bin" lock --socket "$dir/agent.sock" --wait 300s bench:first-grant -- true
end=$(date +%s%N)
echo "first grant $(( (end - start) / 1000000 )) ms after serve started (defaults, 5 fresh masters)"
grep -m1 'is quarantined for' "$dir/agent.log" | sed 's/^/agent log: /'
