#!/usr/bin/env bash
# Configures and builds lockwarden into build/ (Ninja, warnings as errors).
# Idempotent: re-running only rebuilds what changed.
#
#   bash .ci/build.sh            # everything: the binary and the tests
#   bash .ci/build.sh lockwarden # only the given target(s)
#
# A fresh build/ is configured RelWithDebInfo; an existing build/ keeps its build type unless
# LOCKWARDEN_BUILD_TYPE is set.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash .ci/deps.sh

args=(-S . -B build -DLOCKWARDEN_WERROR=ON)
if [[ ! -f build/CMakeCache.txt ]]; then
  args+=(-G Ninja -DCMAKE_BUILD_TYPE="${LOCKWARDEN_BUILD_TYPE:-RelWithDebInfo}")
elif [[ -n "${LOCKWARDEN_BUILD_TYPE:-}" ]]; then
  args+=(-DCMAKE_BUILD_TYPE="$LOCKWARDEN_BUILD_TYPE")
fi

echo "build: configuring build/"
if [[ -n "${CI:-}" ]]; then cmake "${args[@]}"; else cmake "${args[@]}" >/dev/null; fi

jobs=$(nproc)
targets=()
for t in "$@"; do targets+=(--target "$t"); done
echo "build: building ${*:-all targets} with $jobs jobs"
cmake --build build --parallel "$jobs" "${targets[@]}"
echo "build: ok ($(grep -m1 '^CMAKE_BUILD_TYPE:' build/CMakeCache.txt | cut -d= -f2) build in build/)"
