#!/usr/bin/env bash
# THE test command: installs dependencies, builds, runs every test.
#
#   bash tests/run.sh
#
# Unit tests first (pure logic, run in parallel), then integration tests (label "integration":
# each starts real redis-server masters and a real agent; CTest runs them one at a time). The
# browser tests (tests/browser, headless Chromium) are one of the integration tests.
# Then the proof stages, each in its own build directory (docs/security.md):
#   fuzz  the libFuzzer targets: every seed replayed, then a fixed number of executions from a
#         fixed seed, so the same commit passes or fails the same way (tests/fuzz/run.sh)
#   asan  unit and integration tests under ASan+UBSan+LSan (.ci/sanitize.sh address)
#   tsan  unit tests and the threaded integration tests under TSan (.ci/sanitize.sh thread)
# The proof stages' builds compile while the unit and integration stages run (see prebuild).
# Exits non-zero if anything fails. Extra arguments go to every ctest run (e.g. -R Acquire).
# LOCKWARDEN_SKIP="fuzz asan tsan" skips stages (reported as skipped, never as ok).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

start=$SECONDS
stage=deps unit=skipped integration=skipped fuzz=skipped asan=skipped tsan=skipped
timings=""
prebuild_pid=
stop_prebuild() {  # the builds beside the tests, if they are still running
  if [[ -n $prebuild_pid ]]; then kill -- "-$prebuild_pid" 2>/dev/null || true; fi
  prebuild_pid=
}
summary() {
  local rc=$?
  stop_prebuild
  local results="unit: $unit, integration: $integration, fuzz: $fuzz, asan: $asan, tsan: $tsan"
  echo
  bash tests/failed_tests.sh build*/ctest-*.log
  [[ -n $timings ]] && echo "tests/run.sh: stage times:$timings"
  if [[ $stage == finished ]] && ! grep -qE 'FAIL|skipped' <<<"$results"; then
    echo "tests/run.sh: PASS ($results) in $((SECONDS - start))s"
  elif [[ $stage == finished ]] && ! grep -q FAIL <<<"$results"; then
    echo "tests/run.sh: PASS with stages skipped ($results) in $((SECONDS - start))s"
  elif [[ $stage == finished ]]; then
    echo "tests/run.sh: FAIL ($results) in $((SECONDS - start))s"
  else
    echo "tests/run.sh: FAIL at $stage (exit $rc) in $((SECONDS - start))s"
  fi
}
trap summary EXIT
rm -f build*/ctest-*.log  # each stage's ctest output, kept for the summary's failures

bash .ci/deps.sh --browser
timings+=" deps $((SECONDS - start))s"
stage=build
began=$SECONDS
bash .ci/build.sh
timings+=" build $((SECONDS - began))s"

run_ctest() {  # $1 = name, rest = ctest arguments; its output is kept for the summary
  local name=$1; shift
  echo
  echo "==> $name tests"
  ctest --test-dir build --output-on-failure --no-tests=error "$@" 2>&1 | tee "build/ctest-$name.log"
}

skipped() { [[ " ${LOCKWARDEN_SKIP:-} " == *" $1 "* ]]; }

# Runs stage $1 (its result in the variable of that name) unless LOCKWARDEN_SKIP names it.
run_stage() {
  local name=$1 began=$SECONDS; shift
  if skipped "$name"; then
    echo
    echo "==> $name: skipped (LOCKWARDEN_SKIP)"
    return
  fi
  printf -v "$name" FAIL
  if "$@"; then printf -v "$name" ok; fi
  timings+=" $name $((SECONDS - began))s"
}

# The fuzz, asan and tsan builds (~2/3 of the gate's compiling), started beside the unit and
# integration stages at SCHED_IDLE (chrt --idle): they get only the CPU time the tests leave
# unused (the integration tests mostly wait on sockets and timers), so the tests see no
# contention, and each proof stage then finds its build done or nearly so. A build that fails
# here fails again, with its log, in its own stage, which builds incrementally either way.
# Output: build-prebuild.log.
prebuild() {
  local steps=()
  skipped fuzz || steps+=("bash tests/fuzz/run.sh --build-only")
  skipped asan || steps+=("bash .ci/sanitize.sh address --build-only")
  skipped tsan || steps+=("bash .ci/sanitize.sh thread --build-only")
  ((${#steps[@]})) || return 0
  local idle=(chrt --idle 0)
  "${idle[@]}" true 2>/dev/null || idle=(nice -n 19)
  local script=""
  for step in "${steps[@]}"; do script+="${idle[*]} $step || true; "; done
  setsid bash -c "$script" >build-prebuild.log 2>&1 </dev/null &
  prebuild_pid=$!
}
await_prebuild() {
  [[ -n $prebuild_pid ]] || return 0
  local began=$SECONDS
  wait "$prebuild_pid" || true
  prebuild_pid=
  timings+=" prebuild-wait $((SECONDS - began))s"
}

stage=tests
prebuild
run_stage unit run_ctest unit -LE integration --parallel "$(nproc)" "$@"
run_stage integration run_ctest integration -L integration "$@"
await_prebuild
run_stage fuzz bash tests/fuzz/run.sh
run_stage asan bash .ci/sanitize.sh address "$@"
run_stage tsan bash .ci/sanitize.sh thread "$@"
stage=finished
[[ $unit == ok && $integration == ok && $fuzz != FAIL && $asan != FAIL && $tsan != FAIL ]]
