#!/usr/bin/env bash
# Installs what lockwarden needs to build, test and run its demo on Debian 12 (bookworm).
# Run as root (CI does). Fast no-op when everything is already installed.
#
#   bash .ci/deps.sh
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libhiredis-dev prometheus-cpp-dev libspdlog-dev nlohmann-json3-dev libuv1-dev
  libcpp-httplib-dev libtomlplusplus-dev libcli11-dev libgtest-dev libgmock-dev
  redis-server redis-tools
  prometheus  # promtool (rule tests, exposition lint) and the server the alert tests start
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "deps: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "deps: missing: ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "deps: installing packages needs root. Run: sudo bash .ci/deps.sh" >&2
  echo "deps: (or as root: apt-get install ${missing[*]})" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -o Acquire::Retries=3
apt-get install -y --no-install-recommends -o Acquire::Retries=3 "${missing[@]}"

# Debian's redis-server package starts a system instance on 127.0.0.1:6379. The tests and the
# demo start their own masters; do not leave a stray one running (works without systemd too).
# Same for Debian's prometheus package (a system instance on :9090, plus node-exporter when
# recommends are installed; we install none).
for service in redis-server prometheus; do
  if [[ " ${missing[*]} " == *" $service "* ]]; then
    systemctl disable --now "$service" 2>/dev/null \
      || service "$service" stop 2>/dev/null \
      || true
  fi
done

echo "deps: installed ${#missing[@]} package(s)"
