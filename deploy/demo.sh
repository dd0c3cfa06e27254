#!/usr/bin/env bash
# THE demo command: five real Redis masters on loopback and a lockwarden agent in front of them.
#
#   bash deploy/demo.sh
#
# Installs dependencies and builds (as .ci/deps.sh and .ci/build.sh), starts five redis-server
# masters on 127.0.0.1 (ports 7301..7305), then runs `lockwarden serve` in the foreground with
# its log on the terminal. Ctrl-C (or SIGTERM) stops the agent (it releases its locks), then
# the masters, and removes everything the demo created.
#
# Optional environment:
#   LOCKWARDEN_DEMO_BASE_PORT=7301   first master port; the masters use BASE..BASE+4
#   LOCKWARDEN_DEMO_SECONDS=N        stop by itself after N seconds (smoke tests)
#   LOCKWARDEN_DEMO_SOCKET=PATH      agent socket (default /run/lockwarden/lockwarden.sock, or
#                                    under $XDG_RUNTIME_DIR when /run is not writable)
#   LOCKWARDEN_DEMO_ADMIN_PORT=9477  admin HTTP port on 127.0.0.1 (/metrics, /readyz, /api/v1)
#   LOCKWARDEN_DEMO_PROMETHEUS=1     also run Debian's Prometheus server, scraping the agent
#                                    every 5 s with the rules of alerts/ loaded, so the alerts
#                                    can be watched firing (http://127.0.0.1:9090/classic/alerts:
#                                    Debian's Prometheus 2.42 has only the classic UI)
#   LOCKWARDEN_DEMO_PROMETHEUS_PORT=9090  its port on 127.0.0.1
set -euo pipefail

# Started in the background by a non-interactive shell (`bash deploy/demo.sh &` in a script), bash
# begins with SIGINT ignored and cannot trap it, so `kill -INT` would do nothing. Restart once
# with the default disposition so SIGINT always stops the demo cleanly.
if [[ -z ${LW_DEMO_REEXEC:-} ]] && read -r _ sigign < <(grep '^SigIgn:' /proc/$$/status 2>/dev/null) \
  && (((16#$sigign >> 1) & 1)) && env --default-signal=INT true 2>/dev/null; then
  LW_DEMO_REEXEC=1 exec env --default-signal=INT,QUIT bash "${BASH_SOURCE[0]}" "$@"
fi
unset LW_DEMO_REEXEC

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BIN=$ROOT/build/lockwarden
DEFAULT_SOCKET=/run/lockwarden/lockwarden.sock
MASTERS=5

say() { printf 'demo: %s\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

# --- settings ---------------------------------------------------------------------------------
base_port=${LOCKWARDEN_DEMO_BASE_PORT:-7301}
if ! [[ $base_port =~ ^[1-9][0-9]{3,4}$ ]] || ((base_port < 1024 || base_port + MASTERS - 1 > 65535)); then
  die "LOCKWARDEN_DEMO_BASE_PORT must be a port between 1024 and $((65536 - MASTERS)), got \"$base_port\""
fi
demo_seconds=${LOCKWARDEN_DEMO_SECONDS:-}
[[ -z $demo_seconds || $demo_seconds =~ ^[1-9][0-9]*$ ]] \
  || die "LOCKWARDEN_DEMO_SECONDS must be a whole number of seconds, got \"$demo_seconds\""
socket=${LOCKWARDEN_DEMO_SOCKET:-}
admin_port=${LOCKWARDEN_DEMO_ADMIN_PORT:-9477}
[[ $admin_port =~ ^[1-9][0-9]{3,4}$ ]] && ((admin_port <= 65535)) \
  || die "LOCKWARDEN_DEMO_ADMIN_PORT must be a port between 1000 and 65535, got \"$admin_port\""
with_prometheus=${LOCKWARDEN_DEMO_PROMETHEUS:-0}
[[ $with_prometheus == [01] ]] \
  || die "LOCKWARDEN_DEMO_PROMETHEUS must be 0 or 1, got \"$with_prometheus\""
prom_port=${LOCKWARDEN_DEMO_PROMETHEUS_PORT:-9090}
[[ $prom_port =~ ^[1-9][0-9]{3,4}$ ]] && ((prom_port <= 65535)) \
  || die "LOCKWARDEN_DEMO_PROMETHEUS_PORT must be a port between 1000 and 65535, got \"$prom_port\""
# The agent refuses LOCKWARDEN_* variables it does not know; these are the demo's, not its.
unset LOCKWARDEN_DEMO_BASE_PORT LOCKWARDEN_DEMO_SECONDS LOCKWARDEN_DEMO_SOCKET \
  LOCKWARDEN_DEMO_ADMIN_PORT LOCKWARDEN_DEMO_PROMETHEUS LOCKWARDEN_DEMO_PROMETHEUS_PORT

ports=()
for ((i = 0; i < MASTERS; i++)); do ports+=($((base_port + i))); done

# --- refuse early if something is in the way --------------------------------------------------
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "${ports[@]}"; do
  if port_in_use "$p"; then
    die "port $p is already in use (a demo master left running? stop it with: redis-cli -p $p shutdown nosave); or pick other ports with LOCKWARDEN_DEMO_BASE_PORT=$((base_port + 100))"
  fi
done
if port_in_use "$admin_port"; then
  die "admin port $admin_port is already in use (another agent?); pick another with LOCKWARDEN_DEMO_ADMIN_PORT=$((admin_port + 1))"
fi
if ((with_prometheus)) && port_in_use "$prom_port"; then
  die "port $prom_port is already in use (Debian's own prometheus service? systemctl stop prometheus); or pick another with LOCKWARDEN_DEMO_PROMETHEUS_PORT=$((prom_port + 1))"
fi

# --- dependencies and build -------------------------------------------------------------------
bash .ci/deps.sh
bash .ci/build.sh lockwarden
[[ -x $BIN ]] || die "build did not produce $BIN"

run_dir=$(mktemp -d "${TMPDIR:-/tmp}/lockwarden-demo.XXXXXX")

if [[ -z $socket ]]; then
  if [[ -d /run/lockwarden && -w /run/lockwarden ]] || [[ ! -e /run/lockwarden && -w /run ]]; then
    socket=$DEFAULT_SOCKET
  elif [[ -n ${XDG_RUNTIME_DIR:-} && -d $XDG_RUNTIME_DIR && -w $XDG_RUNTIME_DIR ]]; then
    socket=$XDG_RUNTIME_DIR/lockwarden/lockwarden.sock
  else
    socket=$run_dir/lockwarden.sock
  fi
fi
[[ $socket == /* ]] || socket=$PWD/$socket
socket_dir=$(dirname "$socket")
socket_dir_existed=0
[[ -e $socket_dir ]] && socket_dir_existed=1

agent_answers() {  # something answers on the socket (status prints JSON even without quorum)
  [[ -S $socket ]] && [[ -n $("$BIN" status --socket "$socket" --json 2>/dev/null || true) ]]
}
if agent_answers; then
  rmdir "$run_dir"
  die "an agent is already listening on $socket; stop it, or use LOCKWARDEN_DEMO_SOCKET=/tmp/lw-demo.sock"
fi
((${#socket} < 108)) || { rmdir "$run_dir"; die "socket path too long (max 107 bytes): $socket"; }

# --- cleanup, whatever way the demo ends ------------------------------------------------------
agent_pid='' timer_pid='' prom_pid='' agent_ready=0 cleaned=0
redis_pids=()

stop_pid() {  # stop_pid PID SECONDS: SIGTERM, wait up to SECONDS, then SIGKILL; reap it
  local pid=$1 tries=$(($2 * 10))
  kill -TERM "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  while kill -0 "$pid" 2>/dev/null && ((tries-- > 0)); do sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    say "pid $pid did not stop; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=${1:-$?}
  ((cleaned)) && return 0
  cleaned=1
  trap '' INT TERM HUP  # finish cleaning up even if Ctrl-C is pressed again
  [[ -n $timer_pid ]] && { kill "$timer_pid" 2>/dev/null || true; wait "$timer_pid" 2>/dev/null || true; }
  if [[ -n $agent_pid ]]; then
    say "stopping the agent (pid $agent_pid): it releases its locks"
    stop_pid "$agent_pid" 10  # the agent itself gives releases shutdown_grace_ms (2 s)
  fi
  if [[ -n $prom_pid ]]; then
    say "stopping prometheus (pid $prom_pid)"
    stop_pid "$prom_pid" 10
  fi
  if ((${#redis_pids[@]})); then
    say "stopping the ${#redis_pids[@]} masters"
    for pid in "${redis_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${redis_pids[@]}"; do stop_pid "$pid" 5; done
  fi
  # The agent removes its socket when it stops; a killed one cannot. Only ever remove a socket
  # our own agent created (never that of another agent which made ours refuse to start).
  if ((agent_ready)) && [[ -S $socket ]]; then rm -f "$socket"; fi
  if ((!socket_dir_existed)) && [[ -d $socket_dir ]]; then rmdir "$socket_dir" 2>/dev/null || true; fi
  rm -rf "$run_dir"
  say "stopped; nothing left running"
  exit "$rc"
}
trap 'cleanup' EXIT
trap 'echo; cleanup 130' INT
trap 'cleanup 143' TERM
trap 'cleanup 129' HUP

# --- masters ----------------------------------------------------------------------------------
# Each process gets its own session (setsid) so that Ctrl-C in this terminal reaches only this
# script, which then stops them in order: agent first (so it can release its locks), masters last.
for p in "${ports[@]}"; do
  d=$run_dir/redis-$p
  mkdir -p "$d"
  setsid redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    --dir "$d" --logfile "$d/redis.log" --pidfile "$d/redis.pid" </dev/null &
  redis_pids+=($!)
done
for i in "${!ports[@]}"; do
  p=${ports[$i]}
  for ((try = 0; ; try++)); do
    [[ $(redis-cli -p "$p" ping 2>/dev/null) == PONG ]] && break
    if ! kill -0 "${redis_pids[$i]}" 2>/dev/null || ((try >= 300)); then
      tail -n 5 "$run_dir/redis-$p/redis.log" >&2 2>/dev/null || true
      die "redis-server on port $p did not come up (log above)"
    fi
    sleep 0.1
  done
done

# --- prometheus (optional): the alert rules of alerts/ against this agent ---------------------
if ((with_prometheus)); then
  command -v prometheus >/dev/null || die "prometheus not found (Debian package prometheus; bash .ci/deps.sh installs it)"
  prom_dir=$run_dir/prometheus
  mkdir -p "$prom_dir/data"
  # The job is named lockwarden, as the rules expect. 5 s intervals so the tour is quick; the
  # rules' own `for:` durations are kept (LockwardenQuorumLost fires after 1 min).
  cat >"$prom_dir/prometheus.yml" <<PROMETHEUS
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files:
  - $ROOT/alerts/lockwarden.rules.yml
scrape_configs:
  - job_name: lockwarden
    static_configs:
      - targets: ["127.0.0.1:$admin_port"]
PROMETHEUS
  setsid prometheus --config.file="$prom_dir/prometheus.yml" --storage.tsdb.path="$prom_dir/data" \
    --web.listen-address="127.0.0.1:$prom_port" >"$prom_dir/prometheus.log" 2>&1 </dev/null &
  prom_pid=$!
  for ((try = 0; ; try++)); do
    port_in_use "$prom_port" && break
    # A bound for a hung start, not a wait: a first start on a busy disk takes seconds.
    if ! kill -0 "$prom_pid" 2>/dev/null || ((try >= 600)); then
      tail -n 5 "$prom_dir/prometheus.log" >&2 2>/dev/null || true
      die "prometheus did not come up on port $prom_port (log above)"
    fi
    sleep 0.1
  done
fi

# --- admin token (the page's actions need it) ---------------------------------------------------
token_file=$run_dir/admin.token
(umask 077 && head -c 24 /dev/urandom | base64 | tr -d '\n/+=' >"$token_file")
admin_token=$(<"$token_file")

# --- banner -----------------------------------------------------------------------------------
master_args=() master_list=()
for p in "${ports[@]}"; do
  master_args+=(--master "redis://127.0.0.1:$p")
  master_list+=("127.0.0.1:$p")
done
cat <<BANNER

  lockwarden demo
  ---------------
  agent socket  $socket
  masters       ${master_list[*]}
                (quorum $((MASTERS / 2 + 1)) of $MASTERS; run dir $run_dir)
  operator page http://127.0.0.1:$admin_port/
                admin token for its actions: $admin_token
  admin HTTP    http://127.0.0.1:$admin_port/metrics  /readyz  /api/v1/state  /api/v1/leaks
                /runbooks (what the alerts' runbook links open)
                (leak scanner every 10 s)
BANNER
if ((with_prometheus)); then
  cat <<BANNER
  prometheus    http://127.0.0.1:$prom_port/classic/alerts  (alerts/lockwarden.rules.yml, scraping the
                agent every 5 s; kill 3 masters: LockwardenQuorumLost pending, firing 1 min later)
BANNER
fi
cat <<BANNER

  Try from another terminal:
BANNER
if [[ $socket != "$DEFAULT_SOCKET" ]]; then
  echo "    export LOCKWARDEN_SOCKET=$socket"
fi
cat <<BANNER
    $BIN status
    $BIN lock -v --ttl 10s demo:job -- sleep 3
    $BIN lock -v --ttl 10s --wait 1s demo:job -- true  # while the first holds it: exit 75
    redis-cli -p ${ports[0]} shutdown nosave   # kill a master; status shows 4 up
    redis-cli -p ${ports[1]} shutdown nosave   # and another: still a quorum (3 of 5)
    redis-cli -p ${ports[2]} shutdown nosave   # a third: QUORUM LOST, lock exits 69
    curl -s 127.0.0.1:$admin_port/metrics | grep -E '^lockwarden_(masters_up|quorum_margin)'
    $BIN lock --ttl 15s demo:long -- sleep 600 &  # a lock to look at (or force-release) on the page
    redis-cli -p ${ports[3]} set lock:forgotten x   # a key without TTL: on the page, under leaked keys
    $BIN scan ${master_args[*]}
                                               # one-shot leak scan: exit 1 on a key without TTL

  Ctrl-C here stops the agent and the masters.${demo_seconds:+ (Stopping by itself after ${demo_seconds}s.)}

BANNER

# --- agent in the foreground ------------------------------------------------------------------
# Run in the background and `wait` for it: bash defers traps while a foreground child runs,
# but `wait` returns as soon as a signal arrives, so Ctrl-C is handled at once.
# Ctrl-C is a stop for good: the agent releases its clients' locks (--release-on-stop). A
# kill -9 is not: the agent is started again on the same socket, as systemd's
# Restart=on-failure would, and its clients resume their locks (docs/cli.md, Restarts).
# The agent refuses LOCKWARDEN_* variables that are not settings, and the demo's settings are
# its flags: it gets none of the caller's.
start_agent() {
  local unset=()
  for v in $(compgen -e); do [[ $v == LOCKWARDEN_* ]] && unset+=(-u "$v"); done
  setsid env "${unset[@]}" "$BIN" serve --socket "$socket" "${master_args[@]}" \
    --admin-listen "127.0.0.1:$admin_port" --admin-token-file "$token_file" \
    --scan-interval-ms 10000 --max-ttl-ms 15000 --default-ttl-ms 10000 \
    --release-on-stop true </dev/null &
  agent_pid=$!
  agent_is_child=1
}
# After `lockwarden upgrade` the agent serving the socket is the old one's child, not ours: its
# pid, once the old one exited 0 and the socket still answers.
upgraded_agent() {
  local next
  next=$(pgrep -n -f -- "serve --socket $socket " || true)
  [[ -n $next && $next != "$agent_pid" ]] && agent_answers && echo "$next"
}
start_agent

for ((try = 0; try < 300; try++)); do
  kill -0 "$agent_pid" 2>/dev/null || break
  if agent_answers; then agent_ready=1; break; fi
  sleep 0.1
done
if ((agent_ready)); then
  say "agent is up (pid $agent_pid)"
  say "the masters are fresh: they count for locking only ~15 s after they started (restart quarantine, max ttl 15 s; docs/safety.md)"
elif kill -0 "$agent_pid" 2>/dev/null; then
  say "warning: the agent does not answer on $socket yet"
  agent_ready=1  # it is ours and running: its socket is ours to clean up
fi

if [[ -n $demo_seconds ]]; then
  sleep "$demo_seconds" &
  timer_pid=$!
fi

demo_end=$((SECONDS + ${demo_seconds:-0}))
while :; do
  finished=''
  set +e
  if ((agent_is_child)); then
    if [[ -n $timer_pid ]]; then
      wait -n -p finished "$agent_pid" "$timer_pid"
    else
      wait -n -p finished "$agent_pid"
    fi
    status=$?
  else
    # Not our child (upgraded): watched, not waited for. A stop removes its socket; a kill -9
    # leaves it, and is handled as one of our own agent's.
    while kill -0 "$agent_pid" 2>/dev/null; do
      if [[ -n $timer_pid ]] && ((SECONDS >= demo_end)); then finished=$timer_pid; break; fi
      sleep 0.2 &
      wait $!
    done
    if [[ -z $finished ]]; then
      status=0
      [[ -S $socket ]] && status=137
    fi
  fi
  set -e

  if [[ $finished == "$timer_pid" && -n $timer_pid ]]; then
    timer_pid=''
    say "LOCKWARDEN_DEMO_SECONDS=$demo_seconds elapsed"
    cleanup 0
  fi
  if ((status == 0)) && next=$(upgraded_agent); then
    say "the agent was upgraded in place: pid $agent_pid -> $next, its clients kept their locks"
    agent_pid=$next
    agent_is_child=0
    continue
  fi
  ((status == 137)) || break
  say "the agent was killed (kill -9): starting it again on the same socket; its clients resume their locks"
  start_agent
done
# The agent stopped on its own.
agent_pid=''
((status == 0)) || say "the agent exited with status $status"
cleanup "$status"
