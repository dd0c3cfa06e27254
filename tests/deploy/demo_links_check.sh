#!/usr/bin/env bash
# The demo as the README runs it (deploy/demo.sh with LOCKWARDEN_DEMO_PROMETHEUS=1), on ports
# found free, checked against what the README and the demo's banner print:
# - every link (http://HOST:PORT/..., or HOST:PORT/PATH as curl takes it) of the README's
#   agent (9477) and Prometheus (9090), and every one the banner prints (the admin HTTP entry's
#   bare /paths included), answers 200 once the agent is ready (/readyz 200: its fresh masters
#   are out of restart quarantine) and Prometheus too (/-/ready);
# - each raw-protocol example of the README (`echo '{...}' | socat ... UNIX-CONNECT:...`) prints
#   its grant, as printed, on the demo's socket.
# Bare HOST:PORT mentions are addresses, not links: listed, not fetched. Fails (never skips) when
# a tool is missing or fewer links are found than the README and banner hold. Registered in ctest
# as `demo_links`.
#
#   bash tests/deploy/demo_links_check.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fail() { echo "demo_links: $*" >&2; exit 1; }
for tool in curl socat prometheus redis-server python3; do
  command -v "$tool" >/dev/null || fail "$tool not found (bash .ci/deps.sh installs it)"
done

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Seven ports free now: five masters (consecutive), the admin listener and Prometheus.
for ((try = 0; ; try++)); do
  ((try < 50)) || fail "found no 7 free ports"
  base=$((20000 + RANDOM % 12000))  # below the kernel's ephemeral ports (32768 on)
  admin=$((base + 5)) prom=$((base + 6))
  free=1
  for ((p = base; p <= prom; p++)); do port_in_use "$p" && { free=0; break; }; done
  ((free)) && break
done

work=$(mktemp -d /tmp/lw-demo-links.XXXXXX)
demo_pid=''
finish() {
  local rc=$?
  if [[ -n $demo_pid ]] && kill -0 "$demo_pid" 2>/dev/null; then
    kill -TERM "$demo_pid" 2>/dev/null || true  # the demo stops the agent, Prometheus, masters
    wait "$demo_pid" 2>/dev/null || true
  fi
  ((rc == 0)) || { echo "--- demo output (tail)" >&2; tail -n 40 "$work/demo.out" >&2 || true; }
  rm -rf "$work"
  exit "$rc"
}
trap finish EXIT

# LOCKWARDEN_DEMO_SECONDS only bounds a run whose checker died; the checks end it sooner.
LOCKWARDEN_DEMO_PROMETHEUS=1 LOCKWARDEN_DEMO_SECONDS=600 LOCKWARDEN_DEMO_BASE_PORT=$base \
  LOCKWARDEN_DEMO_ADMIN_PORT=$admin LOCKWARDEN_DEMO_PROMETHEUS_PORT=$prom \
  LOCKWARDEN_DEMO_SOCKET=$work/lw.sock bash "$root/deploy/demo.sh" >"$work/demo.out" 2>&1 </dev/null &
demo_pid=$!

# await NAME SECONDS COMMAND...: polls COMMAND until it succeeds; fails if the demo exits first
# or it does not succeed within SECONDS (a bound for a hung demo, not a wait for an event).
await() {
  local what=$1 deadline=$((SECONDS + $2))
  shift 2
  until "$@"; do
    kill -0 "$demo_pid" 2>/dev/null || fail "the demo exited before $what"
    ((SECONDS < deadline)) || fail "no $what within $2 s"
    sleep 0.2
  done
}
http_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$1" || true; }
answers_200() { [[ $(http_code "$1") == 200 ]]; }
# deps and an up-to-date build come first (`.ci/build.sh lockwarden`, a no-op once built).
await "banner and agent" 240 grep -q '^demo: agent is up' "$work/demo.out"
await "agent readiness (/readyz 200)" 60 answers_200 "http://127.0.0.1:$admin/readyz"
await "Prometheus readiness" 60 answers_200 "http://127.0.0.1:$prom/-/ready"

sed -n '/^  lockwarden demo$/,/Ctrl-C here stops/p' "$work/demo.out" >"$work/banner.txt"
[[ -s $work/banner.txt ]] || fail "no banner in the demo's output"

python3 - "$root/README.md" "$work/banner.txt" "$admin" "$prom" >"$work/links.txt" <<'EOF'
import re, sys
readme, banner, admin, prom = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3], sys.argv[4]
link = re.compile(r"(?:http://)?127\.0\.0\.1:(\d+)(/[^\s'\"`)]*)?")
links, addresses = set(), set()
def collect(text, ports, source):
    n = 0
    for m in link.finditer(text):
        port, path = m.group(1), m.group(2)
        if port not in ports:
            addresses.add(m.group(0))
            continue
        if path is None and not m.group(0).startswith("http://"):
            addresses.add(m.group(0))
            continue
        links.add(f"http://127.0.0.1:{ports[port]}{path or '/'}")
        n += 1
    return n
readme_n = collect(readme, {"9477": admin, "9090": prom}, "README")
banner_n = collect(banner, {admin: admin, prom: prom}, "banner")
# The banner's admin HTTP entry: its first line and the continuation lines under it list more
# paths of the same listener, bare.
entry = re.search(r"^  admin HTTP .*\n(?:^ {16}.*\n)*", banner, re.M)
if entry:
    for path in re.findall(r"(?<=\s)(/[\w/.-]*)", entry.group(0)):
        links.add(f"http://127.0.0.1:{admin}{path}")
        banner_n += 1
print(f"# {readme_n} in the README, {banner_n} in the banner; addresses, not links: "
      + ", ".join(sorted(addresses)))
for l in sorted(links):
    print(l)
EOF
head -n1 "$work/links.txt"
mapfile -t links < <(grep -v '^#' "$work/links.txt")
# What the README and the banner hold today; fewer means the parsing (or a text) lost some.
((${#links[@]} >= 8)) || fail "only ${#links[@]} links found: $(printf '%s ' "${links[@]}")"
printf '%s\n' "${links[@]}" | grep -q "127.0.0.1:$prom/classic/alerts$" \
  || fail "the Prometheus alerts link is not among them"

bad=0
for url in "${links[@]}"; do
  code=$(http_code "$url")
  echo "$code $url"
  [[ $code == 200 ]] || bad=$((bad + 1))
done
((bad == 0)) || fail "$bad link(s) did not answer 200"

# The README's raw-protocol examples, as printed, on the demo's socket.
python3 - "$root/README.md" "$work/lw.sock" >"$work/examples.sh" <<'EOF'
import re, sys
text, sock = open(sys.argv[1]).read(), sys.argv[2]
for m in re.finditer(r"^ *(echo '\{[^\n]*\}' \\\n *\| socat [^\n#]*UNIX-CONNECT:)/run/lockwarden/lockwarden\.sock",
                     text, re.M):
    print(re.sub(r"\s*\\\n\s*", " ", m.group(1)).strip() + sock)
EOF
mapfile -t examples <"$work/examples.sh"
((${#examples[@]} >= 2)) || fail "expected the README's 2 socat examples, found ${#examples[@]}"
for example in "${examples[@]}"; do
  out=$(bash -c "$example")
  echo "example: $example"
  echo "  -> $out"
  [[ $out =~ ^\{\"id\":1,\"ok\":true,.*\"token\":\"[0-9a-f]{40}\" ]] \
    || fail "the README's example printed '$out', not a grant"
done
# The quick start's metrics command, as printed: the two lines it names, not every bucket.
metrics_cmd=$(grep -o "curl -s 127.0.0.1:9477/metrics | grep [^#]*'" "$root/README.md" | head -n1)
[[ -n $metrics_cmd ]] || fail "no metrics command in the README's quick start"
metrics=$(bash -c "${metrics_cmd/9477/$admin}")
echo "quick start: $metrics_cmd"
printf '  -> %s\n' "$metrics"
[[ $(wc -l <<<"$metrics") == 2 && $metrics == *lockwarden_masters_up* && $metrics == *lockwarden_quorum_margin* ]] \
  || fail "the quick start's metrics command printed the above, not its two lines"
echo "demo_links: ${#links[@]} links answer 200, ${#examples[@]} raw-protocol examples print their grant, the metrics command its 2 lines"
