#!/usr/bin/env bash
# THE test command: installs dependencies, builds, runs every test.
#
#   bash tests/run.sh
#
# The checks of the repository's files first (alert rules, deploy files, the package, the safety
# checker's own checks: label "unit"), then the integration tests (label "integration": each
# starts real redis-server masters and a real agent; CTest runs them one at a time). The browser
# tests (tests/browser, headless Chromium) are one of the integration tests.
# Then the proof stages, each in its own build directory (docs/security.md):
#   fuzz  the libFuzzer targets: every seed replayed, then a fixed number of executions from a
#         fixed seed, so the same commit passes or fails the same way (tests/fuzz/run.sh)
#   asan  the unit tests (label "logic": pure logic, gtest), the integration tests and
#         bench_smoke under ASan+UBSan+LSan (.ci/sanitize.sh address)
#   tsan  the threaded integration tests under TSan (.ci/sanitize.sh thread)
# The unit tests and bench_smoke are compiled and run once, instrumented, in the asan stage;
# with asan skipped they are built and run in the plain build instead. The proof stages' builds compile while the
# integration stage runs, and the tsan build while the asan stage runs (see background_build).
# Exits non-zero if anything fails. Extra arguments go to every ctest run (e.g. -R Acquire).
# LOCKWARDEN_SKIP="fuzz asan tsan" skips stages (reported as skipped, never as ok).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

start=$SECONDS
stage=deps unit=skipped integration=skipped fuzz=skipped asan=skipped tsan=skipped
timings=""
build_pid=
stop_background_build() {  # the builds beside the tests, if they are still running
  if [[ -n $build_pid ]]; then kill -- "-$build_pid" 2>/dev/null || true; fi
  build_pid=
}
summary() {
  local rc=$?
  stop_background_build
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

skipped() { [[ " ${LOCKWARDEN_SKIP:-} " == *" $1 "* ]]; }

bash .ci/deps.sh --browser
timings+=" deps $((SECONDS - start))s"
stage=build
began=$SECONDS
# What the integration stage runs (tests/CMakeLists.txt: lw_integration_targets). The unit
# tests and bench_smoke (with the bench's load generators) run once, instrumented, in the asan
# stage; here only when that stage is skipped.
targets=(lw_integration_targets)
unit_args=(-LE integration)
integration_args=(-L integration)
if skipped asan; then
  targets+=(lw_unit_tests lw_bench lw_bench_raw lw_bench_handover_codec lw_bench_master_cost)
else
  unit_args=(-LE 'integration|logic' -E '^lw_unit_tests_NOT_BUILT$')
  integration_args=(-L integration -E '^bench_smoke$')
fi
bash .ci/build.sh "${targets[@]}"
timings+=" build $((SECONDS - began))s"

run_ctest() {  # $1 = name, rest = ctest arguments; its output is kept for the summary
  local name=$1; shift
  echo
  echo "==> $name tests"
  ctest --test-dir build --output-on-failure --no-tests=error "$@" 2>&1 | tee "build/ctest-$name.log"
}

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

# Work for later stages, started beside a stage that leaves CPU unused at SCHED_IDLE (chrt
# --idle): it gets only the CPU time the tests leave (the integration tests mostly wait on
# sockets and timers), so the tests see no contention, and each proof stage then finds its build
# done or nearly so. The fuzz and asan builds run beside the integration stage; the fuzz run and
# then the tsan build beside the asan stage. A build that fails here fails again, with its log,
# in its own stage, which builds incrementally either way. Output: build-background-<names>.log.
# $@: what to start, one after another: fuzz, asan, tsan (their builds), fuzz-run (the fuzz
# stage itself: its output goes to build-fuzz-run.log and its exit status to build-fuzz-run.rc;
# an input counts as a hang after 300 s instead of 10, since the run may wait for CPU).
background_build() {
  local steps=() name
  for name in "$@"; do
    skipped "${name%-run}" && continue
    case $name in
      fuzz) steps+=("bash tests/fuzz/run.sh --build-only") ;;
      fuzz-run) steps+=("env LOCKWARDEN_FUZZ_TIMEOUT_S=300 bash tests/fuzz/run.sh \
        >build-fuzz-run.log 2>&1; echo \$? >build-fuzz-run.rc") ;;
      asan) steps+=("bash .ci/sanitize.sh address --build-only") ;;
      tsan) steps+=("bash .ci/sanitize.sh thread --build-only") ;;
    esac
  done
  ((${#steps[@]})) || return 0
  local idle=(chrt --idle 0)
  "${idle[@]}" true 2>/dev/null || idle=(nice -n 19)
  local script="" step
  for step in "${steps[@]}"; do script+="${idle[*]} $step || true; "; done
  local IFS=-
  setsid bash -c "$script" >"build-background-$*.log" 2>&1 </dev/null &
  build_pid=$!
}
await_build() {
  [[ -n $build_pid ]] || return 0
  local began=$SECONDS
  wait "$build_pid" || true
  build_pid=
  timings+=" $1-build-wait $((SECONDS - began))s"
}

# The fuzz stage's result, from its run beside the asan stage (background_build fuzz-run).
fuzz_result() {
  echo
  cat build-fuzz-run.log 2>/dev/null || echo "fuzz: the run left no log"
  [[ $(cat build-fuzz-run.rc 2>/dev/null) == 0 ]]
}

stage=tests
rm -f build-fuzz-run.log build-fuzz-run.rc
background_build fuzz asan
run_stage unit run_ctest unit "${unit_args[@]}" --parallel "$(nproc)" "$@"
run_stage integration run_ctest integration "${integration_args[@]}" "$@"
await_build fuzz-asan
# The asan stage in two steps: its unit tests take both cores (and each of their ~560 processes
# starts slower beside a fuzzer), its integration tests leave one idle for the fuzz run and
# the tsan build.
asan_stage() {
  local status=0
  bash .ci/sanitize.sh address --unit-only "$@" || status=1
  background_build fuzz-run tsan
  bash .ci/sanitize.sh address --no-unit "$@" || status=1
  return $status
}
if skipped asan; then background_build fuzz-run tsan; fi
run_stage asan asan_stage "$@"
await_build fuzz-run-tsan
run_stage fuzz fuzz_result
run_stage tsan bash .ci/sanitize.sh thread "$@"
stage=finished
[[ $unit == ok && $integration == ok && $fuzz != FAIL && $asan != FAIL && $tsan != FAIL ]]
