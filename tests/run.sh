#!/usr/bin/env bash
# THE test command: installs dependencies, builds, runs every test.
#
#   bash tests/run.sh
#
# Unit tests first (pure logic, run in parallel), then integration tests (label "integration":
# each starts real redis-server masters and a real agent; CTest runs them one at a time). The
# browser tests (tests/browser, headless Chromium) are one of the integration tests.
# Exits non-zero if anything fails. Extra arguments go to both ctest runs (e.g. -R Acquire).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

start=$SECONDS
stage=deps unit=skipped integration=skipped
summary() {
  local rc=$?
  echo
  if [[ $stage == finished && $unit == ok && $integration == ok ]]; then
    echo "tests/run.sh: PASS (unit: ok, integration: ok) in $((SECONDS - start))s"
  elif [[ $stage == finished ]]; then
    echo "tests/run.sh: FAIL (unit: $unit, integration: $integration) in $((SECONDS - start))s"
  else
    echo "tests/run.sh: FAIL at $stage (exit $rc) in $((SECONDS - start))s"
  fi
}
trap summary EXIT

bash .ci/deps.sh --browser
stage=build
bash .ci/build.sh

run_ctest() {  # $1 = name, rest = ctest arguments
  local name=$1; shift
  echo
  echo "==> $name tests"
  ctest --test-dir build --output-on-failure --no-tests=error "$@"
}

stage=tests unit=FAIL integration=FAIL
run_ctest unit -LE integration --parallel "$(nproc)" "$@" && unit=ok
run_ctest integration -L integration "$@" && integration=ok
stage=finished
[[ $unit == ok && $integration == ok ]]
