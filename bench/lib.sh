# Shared by the bench scripts (source it): a private run directory removed on exit, every
# process started killed on exit, and five fresh redis-server masters on free loopback ports.
#
#   bench_init NAME     run=/tmp/NAME-XXXXXX; pids=() and agent= are killed by the EXIT trap
#   start_masters       sets ports, rpids and masters (the --master arguments for the agent);
#                       the masters are fresh, so run the agent with --restart-quarantine false
#                       (or it keeps them out of quorum for max_ttl). Returns 1 (after saying
#                       why) if one cannot be started.
#   start_etcd          three etcd members (Debian's etcd-server) on loopback, data on /dev/shm
#                       (etcd's best case); sets etcd_endpoints (H:P,...) and etcd_pids (P,...).
#                       Returns 1 (after saying why) when etcd is missing or does not start.
#   bench_tls_files     a CA and a server certificate for 127.0.0.1 in $run/tls (openssl);
#                       after it, start_masters also opens a TLS port on each master (the same
#                       processes, so plain and TLS parts meet the same masters) and sets
#                       tls_masters (the --master rediss:// arguments) and tls_ca.

bench_init() {
  run=$(mktemp -d "/tmp/$1-XXXXXX")
  pids=() bench_cleanup_dirs=()
  agent=
  trap bench_cleanup EXIT
}

bench_cleanup() {
  [[ -n $agent ]] && kill "$agent" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$run" "${bench_cleanup_dirs[@]}"
}

start_etcd() {
  command -v etcd >/dev/null || { echo "bench: no etcd (apt-get install etcd-server)" >&2; return 1; }
  local data i cluster='' client_ports=() peer_ports=() pids_e=() deadline
  data=$(mktemp -d /dev/shm/lw-bench-etcd-XXXXXX)
  for i in 0 1 2; do
    client_ports+=("$(free_port)") peer_ports+=("$(free_port)")
    cluster+="${cluster:+,}e$i=http://127.0.0.1:${peer_ports[i]}"
  done
  for i in 0 1 2; do
    ETCD_UNSUPPORTED_ARCH= etcd --name "e$i" --data-dir "$data/e$i" \
      --listen-client-urls "http://127.0.0.1:${client_ports[i]}" \
      --advertise-client-urls "http://127.0.0.1:${client_ports[i]}" \
      --listen-peer-urls "http://127.0.0.1:${peer_ports[i]}" \
      --initial-advertise-peer-urls "http://127.0.0.1:${peer_ports[i]}" \
      --initial-cluster "$cluster" --initial-cluster-state new \
      --initial-cluster-token lw-bench --log-level error >"$run/etcd-$i.log" 2>&1 &
    pids_e+=("$!") pids+=("$!")
  done
  bench_cleanup_dirs+=("$data")
  etcd_endpoints=$(printf '127.0.0.1:%s,' "${client_ports[@]}") etcd_endpoints=${etcd_endpoints%,}
  etcd_pids=$(IFS=,; echo "${pids_e[*]}")
  deadline=$((SECONDS + 30))
  while ((SECONDS < deadline)); do
    local healthy=0 port
    for port in "${client_ports[@]}"; do
      curl -sf "http://127.0.0.1:$port/health" 2>/dev/null | grep -q '"health":"true"' &&
        healthy=$((healthy + 1))
    done
    ((healthy == 3)) && return 0
    sleep 0.2
  done
  echo "bench: etcd did not become healthy; its log:" >&2
  tail -5 "$run/etcd-0.log" >&2
  return 1
}

bench_tls_files() {
  local d=$run/tls ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  mkdir -p "$d"
  openssl req -x509 "${ec[@]}" -keyout "$d/ca.key" -out "$d/ca.crt" -days 2 \
    -subj "/CN=lockwarden bench CA" 2>/dev/null
  openssl req "${ec[@]}" -keyout "$d/server.key" -out "$d/server.csr" -subj /CN=localhost 2>/dev/null
  echo "subjectAltName=DNS:localhost,IP:127.0.0.1" >"$d/server.ext"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -out "$d/server.crt" -days 2 -extfile "$d/server.ext" 2>/dev/null
  tls_ca=$d/ca.crt
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start_masters() {
  ports=() rpids=() masters=() tls_masters=()
  local i
  for i in 1 2 3 4 5; do start_master "$i" || return 1; done
}

# start_master I: one redis-server on a free port, appended to ports, rpids and masters. Ready
# once it answers as this very process (not some other server that took the port first). If it
# exits (the port was taken meanwhile), it is started again on another port; 5 attempts, each
# with a generous deadline (a loaded machine), rather than waiting forever.
start_master() {
  local i=$1 port pid deadline _ tls_port= tls_args=()
  for _ in 1 2 3 4 5; do
    port=$(free_port)
    if [[ -n ${tls_ca:-} ]]; then
      tls_port=$(free_port)
      tls_args=(--tls-port "$tls_port" --tls-cert-file "$run/tls/server.crt"
        --tls-key-file "$run/tls/server.key" --tls-ca-cert-file "$tls_ca" --tls-auth-clients no)
    fi
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$run" \
      --logfile "$run/redis-$i.log" "${tls_args[@]}" &
    pid=$!
    pids+=("$pid")
    deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
      if [[ $(redis-cli -p "$port" info server 2>/dev/null | tr -d '\r' |
        sed -n 's/^process_id://p') == "$pid" ]]; then
        rpids+=("$pid")
        ports+=("$port")
        masters+=(--master "redis://127.0.0.1:$port")
        [[ -n $tls_port ]] && tls_masters+=(--master "rediss://127.0.0.1:$tls_port")
        return 0
      fi
      sleep 0.02
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  echo "bench: redis-server $i did not start (5 attempts); its log:" >&2
  tail -5 "$run/redis-$i.log" >&2
  return 1
}
