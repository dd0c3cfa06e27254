#!/usr/bin/env bash
# Installs what lockwarden needs to build, test and run its demo on Debian 12 (bookworm).
# Run as root (CI does). Fast no-op when everything is already installed.
#
#   bash .ci/deps.sh             what building, the demo and the C++ tests need
#   bash .ci/deps.sh --browser   also Chromium and the browser tests' npm packages
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  libhiredis-dev libssl-dev prometheus-cpp-dev libspdlog-dev nlohmann-json3-dev libuv1-dev
  libcpp-httplib-dev libtomlplusplus-dev libcli11-dev libgtest-dev libgmock-dev
  redis-server redis-tools
  prometheus  # promtool (rule tests, exposition lint) and the server the alert tests start
  clang-14 libclang-rt-14-dev  # libFuzzer targets and the sanitizer builds (tests/fuzz)
  stunnel4 openssl  # the TLS recipe of deploy/stunnel and its test
  libsystemd-dev systemd python3-yaml  # sd_notify (Type=notify, watchdog); tests/deploy/check.sh
  python3 nodejs golang-go socat  # clients/ (Python, Node 18+, Go 1.19+, shell) and their tests
  python3-venv mypy  # the Python package installed into a venv, checked by mypy --strict
  node-typescript  # tsc checks the Node client's .d.ts
  default-jdk-headless junit5  # clients/java: javac, jar, and JUnit 5's console launcher
  # ... and Maven, building offline from Debian's /usr/share/maven-repo (clients/java/pom.xml)
  maven libmaven-compiler-plugin-java libmaven-resources-plugin-java libmaven-jar-plugin-java
  libsurefire-java libmaven-install-plugin-java
  help2man man-db  # the Debian package's man pages, generated from --help and checked by man
)
browser=0
case "${1:-}" in
  --browser) browser=1 ;;
  '') ;;
  *) echo "usage: bash .ci/deps.sh [--browser]" >&2; exit 64 ;;
esac
if ((browser)); then
  # The browser tests drive Debian's chromium headless (playwright-core, tests/browser); the
  # fonts are chromium's recommends that matter for readable screenshots.
  packages+=(chromium fonts-liberation fonts-dejavu-core)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$p")
done

# Installs the missing Debian packages (needs root).
install_packages() {
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
}

if ((${#missing[@]} == 0)); then
  echo "deps: all ${#packages[@]} packages already installed"
else
  install_packages
fi

((browser)) || exit 0

# The browser tests' npm packages (playwright-core, pinned in tests/browser/package-lock.json).
# They need Node.js >= 20 with npm; Debian 12's nodejs is 18, so CI machines bring their own
# (e.g. NodeSource's nodejs 20). npm ci runs only when node_modules is missing or was installed
# from another lockfile.
browser_dir=tests/browser
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if ! command -v npm >/dev/null || ((node_major < 20)); then
  echo "deps: the browser tests need Node.js >= 20 and npm; found node" \
    "$(node --version 2>/dev/null || echo none), npm $(npm --version 2>/dev/null || echo none)." >&2
  echo "deps: Debian 12's nodejs package is 18: install Node.js 20 (e.g. from" \
    "https://deb.nodesource.com) and run bash .ci/deps.sh again" >&2
  exit 1
fi
# Also the benchmark's node-redlock baseline (redlock + ioredis, pinned in bench/node), which
# the bench_smoke integration test runs, and the Node client's type check's @types/node (pinned
# in clients/node; its test.sh then installs it into a scratch project from npm's cache).
for node_dir in "$browser_dir" bench/node clients/node; do
  lock_sum=$(sha256sum "$node_dir/package-lock.json" | cut -d' ' -f1)
  stamp="$node_dir/node_modules/.lockwarden-lock.sha256"
  if [[ "$(cat "$stamp" 2>/dev/null)" == "$lock_sum" ]]; then
    echo "deps: $node_dir/node_modules up to date"
  else
    echo "deps: npm ci in $node_dir"
    (cd "$node_dir" && npm ci --no-audit --no-fund)
    echo "$lock_sum" >"$stamp"
  fi
done
