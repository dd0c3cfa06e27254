# Shared by the bench scripts (source it): a private run directory removed on exit, every
# process started killed on exit, and five fresh redis-server masters on free loopback ports.
#
#   bench_init NAME     run=/tmp/NAME-XXXXXX; pids=() and agent= are killed by the EXIT trap
#   start_masters       sets ports, rpids and masters (the --master arguments for the agent);
#                       the masters are fresh, so run the agent with --restart-quarantine false
#                       (or it keeps them out of quorum for max_ttl)

bench_init() {
  run=$(mktemp -d "/tmp/$1-XXXXXX")
  pids=()
  agent=
  trap bench_cleanup EXIT
}

bench_cleanup() {
  [[ -n $agent ]] && kill "$agent" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$run"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start_masters() {
  ports=() rpids=() masters=()
  local i port
  for i in 1 2 3 4 5; do
    port=$(free_port)
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$run" \
      --logfile "$run/redis-$i.log" &
    pids+=($!)
    rpids+=($!)
    ports+=("$port")
    masters+=(--master "redis://127.0.0.1:$port")
    until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.02; done
  done
}
