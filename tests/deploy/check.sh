#!/usr/bin/env bash
# CI check of deploy/: the systemd unit, the Kubernetes manifests, the Compose files and the
# Dockerfile (tests/deploy/check_deploy.py says what each check proves). Registered in ctest as
# `deploy_check` (label unit).
#
#   bash tests/deploy/check.sh [path/to/lockwarden]     (default: build/lockwarden)
#
# Then a self-test: the same checker on copies of deploy/ with one fault each (an unknown unit
# key, a config key the agent refuses, a missing mount, ...) must fail every time, naming the
# fault, so a checker that passes everything cannot go unnoticed.
#
# Needs Debian's python3-yaml (run with /usr/bin/python3: a pyenv or venv python may lack it),
# systemd (systemd-analyze, systemd-sysusers; systemd need not be running), promtool, readelf.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$(realpath "${1:-$ROOT/build/lockwarden}")
PY=/usr/bin/python3
CHECK=$ROOT/tests/deploy/check_deploy.py

missing=()
[[ -x $BIN ]] || missing+=("the lockwarden binary ($BIN; build it first)")
for tool in systemd-analyze systemd-sysusers promtool readelf ldd dpkg; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
"$PY" -c 'import yaml' 2>/dev/null || missing+=("python3-yaml for $PY")
if ((${#missing[@]})); then
  printf 'deploy: missing: %s\n' "${missing[@]}" >&2
  echo "deploy: install them with: bash .ci/deps.sh" >&2
  exit 1
fi

status=0
"$PY" "$CHECK" --root "$ROOT" --bin "$BIN" || status=1

# --- self-test ---------------------------------------------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lw-deploy-selftest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# A scratch repository: deploy/ copied (the faults go there), everything else linked.
for entry in "$ROOT"/* "$ROOT"/.ci; do
  name=$(basename "$entry")
  [[ $name == deploy || $name == build* ]] || ln -s "$entry" "$tmp/$name"
done

# mutate NAME EXPECTED_TEXT COMMAND...: fresh copy of deploy/, COMMAND run in it, then the
# checker must fail and say EXPECTED_TEXT.
mutate() {
  local name=$1 expected=$2
  shift 2
  rm -rf "$tmp/deploy"
  cp -r "$ROOT/deploy" "$tmp/deploy"
  (cd "$tmp/deploy" && "$@")
  local out rc=0
  out=$("$PY" "$CHECK" --root "$tmp" --bin "$BIN" 2>&1) || rc=$?
  if ((rc == 0)) || [[ $out != *"$expected"* ]]; then
    echo "deploy: self-test FAILED: '$name' was not caught (rc $rc, wanted \"$expected\"):" >&2
    printf '%s\n' "$out" | sed 's/^/    /' >&2
    status=1
  else
    echo "deploy: self-test: caught $name"
  fi
}

mutate "unknown unit key" "Unknown key 'Bogus'" \
  sed -i 's/^\[Service\]$/[Service]\nBogus=1/' systemd/lockwarden.service
mutate "Type=simple" "Type=simple" \
  sed -i 's/^Type=notify$/Type=simple/' systemd/lockwarden.service
mutate "weaker hardening" "exposure" \
  sed -i -E '/^(ProtectKernel|ProtectControl|ProtectClock|RestrictNamespaces|RestrictRealtime|SystemCallFilter|MemoryDeny|LockPersonality|PrivateDevices)/d' \
  systemd/lockwarden.service
mutate "credential not loaded" "LoadCredential" \
  sed -i '/^LoadCredential=admin-token/d' systemd/lockwarden.service
mutate "unknown setting in the systemd config" "check-config refused" \
  sed -i 's/^node_timeout_ms = 50/node_timeout = 50/' systemd/config.toml
mutate "unparsable manifest" "does not parse" \
  sed -i 's/^  name: lockwarden-config$/  name: [lockwarden-config/' k8s/configmap.yaml
mutate "object without a name" "has no metadata.name" \
  sed -i '0,/^  name: lockwarden-secrets$/s//  labels: {}/' k8s/secret.yaml
mutate "bad value in the ConfigMap" "check-config refused" \
  sed -i 's/^    node_timeout_ms = 50$/    node_timeout_ms = 900/' k8s/configmap.yaml
mutate "rollout faster than quarantine" "minReadySeconds" \
  sed -i 's/^  minReadySeconds: 300$/  minReadySeconds: 30/' k8s/redis-masters.yaml
# The app container's (second) mount of the socket volume becomes another volume.
mutate "socket not shared with the app" "does not share the socket" \
  perl -0pi -e 's/(- name: lockwarden-run\n.*?- name: )lockwarden-run/$1lockwarden-config/s' \
  k8s/app.yaml
mutate "missing compose mount" "does not exist" \
  sed -i 's#\./prometheus.yml:/etc#./no-such-prometheus.yml:/etc#' compose/compose.yaml
mutate "COPY of a missing path" "no such file" \
  sed -i 's#^COPY web/ web/$#COPY no-such-dir/ web/#' compose/Dockerfile
mutate "COPY of an ignored path" "excluded by" \
  sed -i 's#^COPY web/ web/$#COPY docs/ docs/#' compose/Dockerfile
mutate "runtime library not installed" "does not install libuv1" \
  sed -i 's/ libuv1 \\$/ \\/' compose/Dockerfile
mutate "rule file not mounted" "promtool check config" \
  sed -i 's#/etc/prometheus/alerts/lockwarden.rules.yml#/etc/prometheus/alerts/missing.yml#' \
  compose/prometheus.yml

if ((status == 0)); then
  echo "deploy: PASS"
else
  echo "deploy: FAIL" >&2
fi
exit "$status"
