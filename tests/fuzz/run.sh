#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan+UBSan) into build-fuzz/ and runs them.
#
#   bash tests/fuzz/run.sh [target...]
#       The gate (tests/run.sh runs it): deterministic. Each target first replays every input of
#       its seed corpus (tests/fuzz/corpus/<name>/, regressions included), then mutates from that
#       corpus for a fixed number of executions (LOCKWARDEN_FUZZ_RUNS, default 40000) from a
#       fixed seed (LOCKWARDEN_FUZZ_SEED, default 1). The same commit, cloned to the same path,
#       gives the same executions, so it passes or fails the same way every time. It never
#       depends on the clock, except that one input running over 10 s (LOCKWARDEN_FUZZ_TIMEOUT_S)
#       counts as a hang. (The
#       path counts: clang 14 writes source paths into the sanitizers' metadata, which
#       -ffile-prefix-map does not reach, and a different binary explores differently.)
#
#   bash tests/fuzz/run.sh --build-only [target...]
#       Builds the targets and runs nothing (tests/run.sh's background_build).
#
#   bash tests/fuzz/run.sh --explore SECONDS [--seed N] [--merge] [target...]
#       Exploration, NOT part of the gate: a random seed (printed; --seed repeats a run), bounded
#       by time. A failure prints the input and the command that adds it to the seed corpus as a
#       regression. --merge adds the inputs that found new coverage to tests/fuzz/corpus/<name>/
#       (libFuzzer -merge=1: only inputs that add coverage), to be reviewed and committed.
#
# Fails if any target crashes, reports a sanitizer error, violates an invariant, hangs (> 10 s
# on one input) or runs out of memory. Nothing generated is written into the repository (but
# by --merge): working corpora, logs and failing inputs (crash-<sha1>, timeout-..., oom-...)
# go to build-fuzz/out/<target>/ (or $LOCKWARDEN_FUZZ_OUT/<target>/). Reproduce one with
#   build-fuzz/tests/fuzz/<target> build-fuzz/out/<target>/crash-<sha1>
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

usage() {
  echo "usage: bash tests/fuzz/run.sh [target...]" >&2
  echo "       bash tests/fuzz/run.sh --explore SECONDS [--seed N] [--merge] [target...]" >&2
  exit 64
}
explore=0 seconds=0 merge=0 build_only=0
seed=${LOCKWARDEN_FUZZ_SEED:-1}
runs=${LOCKWARDEN_FUZZ_RUNS:-40000}
targets=()
while (($#)); do
  case $1 in
    --explore) explore=1; seconds=${2:-}; shift 2 || usage ;;
    --seed) seed=${2:-}; explicit_seed=1; shift 2 || usage ;;
    --merge) merge=1; shift ;;
    --build-only) build_only=1; shift ;;
    -*) usage ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=(protocol_fuzz config_fuzz)
if ((explore)); then
  [[ $seconds =~ ^[0-9]+$ ]] && ((seconds >= 1)) || usage
  # A seed from the kernel's random source, printed so that a finding can be replayed.
  [[ -n ${explicit_seed:-} ]] || seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
elif ((merge)); then
  usage
fi
[[ $seed =~ ^[0-9]+$ && $runs =~ ^[0-9]+$ ]] || usage
for tool in clang-14 clang++-14; do
  command -v "$tool" >/dev/null || { echo "fuzz: $tool missing: bash .ci/deps.sh" >&2; exit 1; }
done

build=build-fuzz
out=${LOCKWARDEN_FUZZ_OUT:-$build/out}
if [[ ! -f $build/CMakeCache.txt ]]; then
  echo "fuzz: configuring $build/ (clang-14, LOCKWARDEN_FUZZ=ON)"
  CC=clang-14 CXX=clang++-14 cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLOCKWARDEN_FUZZ=ON -DLOCKWARDEN_TESTS=OFF >/dev/null
fi
build_args=()
for t in "${targets[@]}"; do
  build_args+=(--target "$t")
  # A target's dictionary printer (tests/fuzz/<name>_dict.cc), when it has one.
  if [[ -f tests/fuzz/${t%_fuzz}_dict.cc ]]; then build_args+=(--target "${t%_fuzz}_dict"); fi
done
echo "fuzz: building ${targets[*]}"
if ! cmake --build $build --parallel "$(nproc)" "${build_args[@]}" >$build/build.log 2>&1; then
  tail -40 $build/build.log
  echo "fuzz: build failed (full log: $build/build.log)" >&2
  exit 1
fi
for t in "${targets[@]}"; do
  [[ -x $build/tests/fuzz/$t ]] || { echo "fuzz: $t did not build" >&2; exit 1; }
done
if ((build_only)); then echo "fuzz: built ${targets[*]}"; exit 0; fi

# One of libFuzzer's final "stat::<name>: <value>" lines of the log in $dir.
final_stat() { grep -E "^stat::$1:" "$dir/fuzz.log" | awk '{print $2}' | tail -1; }

# Prints what broke in the log $1 and the failing inputs in $dir; $2: the seed corpus dir.
report_failure() {
  grep -E -A1 'fuzz invariant violated|ERROR: [A-Za-z]+Sanitizer|ERROR: libFuzzer|runtime error' \
    "$1" | head -20 || true
  echo "--- the end of its log ($1):"
  grep -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)|Uses:' "$1" | tail -30
  local input
  for input in "$dir"/crash-* "$dir"/timeout-* "$dir"/oom-* "$dir"/leak-*; do
    [[ -e $input ]] || continue
    echo "fuzz: input to reproduce: $input"
    echo "fuzz: once fixed, keep it as a regression: cp $input $2/regress-$(basename "$input")"
  done
}

# Sanitizer settings of every run; stdin is /dev/null: nothing the target is made to read may
# wait for a terminal.
run_target() {
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    setarch "$(uname -m)" --addr-no-randomize "$@" </dev/null
}

# Replays and then mutates with one target; prints its report, returns non-zero on a failure.
fuzz_one() {
  local t=$1 name=${1%_fuzz}  # a target's corpus and dictionary: protocol_fuzz -> corpus/protocol
  local seeds_dir=tests/fuzz/corpus/$name
  dir=$out/$t
  rm -rf "$dir"
  mkdir -p "$dir/corpus"
  # The seeds go in by name, in a fixed order (-seed_inputs), and the working corpus starts
  # empty: libFuzzer orders its initial corpus by size only, so seeds of equal size would
  # otherwise come in the directory's order, which depends on the file system (ext4 hashes
  # names with a per-file-system seed), and the same seed would run different inputs.
  local seeds
  seeds=$(find "$seeds_dir" -type f | wc -l)
  find "$PWD/$seeds_dir" -type f | LC_ALL=C sort | paste -sd, >"$dir/seeds.list"
  local common=(-timeout="${LOCKWARDEN_FUZZ_TIMEOUT_S:-10}" -rss_limit_mb=2048 -max_len=4096 -artifact_prefix="$dir/")
  # The dictionary: what <name>_dict prints from the sources (config: the setting keys of
  # Settings()), then tests/fuzz/<name>.dict; the same commit gives the same dictionary.
  local dict=tests/fuzz/$name.dict
  if [[ -x $build/tests/fuzz/${name}_dict ]]; then
    { run_target "$build/tests/fuzz/${name}_dict"; cat "$dict"; } >"$dir/$name.dict"
    dict=$dir/$name.dict
  fi
  [[ -f $dict ]] && common+=(-dict="$dict")

  # 1. Replay: every seed once, by name, so a regression input that fails is named.
  echo
  echo "==> $t: replaying $seeds seed inputs"
  if ! run_target "$build/tests/fuzz/$t" "${common[@]}" "$seeds_dir"/* >"$dir/replay.log" 2>&1; then
    echo "fuzz: $t FAILED on a seed input:"
    report_failure "$dir/replay.log" "$seeds_dir"
    return 1
  fi

  # 2. Mutation: a fixed budget of executions (gate) or of time (exploration), from one seed.
  # -reload=0: never re-read the corpus directory on a timer.
  local budget
  if ((explore)); then
    budget=(-max_total_time="$seconds")
    echo "==> $t: exploring for ${seconds}s, seed $seed (repeat: --seed $seed)"
  else
    budget=(-runs="$runs")
    echo "==> $t: $runs executions from seed $seed"
  fi
  local rc=0
  run_target "$build/tests/fuzz/$t" "${common[@]}" "${budget[@]}" -seed="$seed" -reload=0 \
    -seed_inputs=@"$dir/seeds.list" -print_final_stats=1 "$dir/corpus" >"$dir/fuzz.log" 2>&1 \
    || rc=$?
  # libFuzzer's last status line: "#N DONE cov: C ft: F corp: K/S lim: L exec/s: E rss: R".
  local done_line
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$dir/fuzz.log" | tail -1 || true)
  if ((rc != 0)) || [[ -z $done_line ]]; then
    echo "fuzz: $t FAILED (exit $rc, seed $seed):"
    report_failure "$dir/fuzz.log" "$seeds_dir"
    return 1
  fi
  local cov ft files
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$done_line")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$done_line")
  files=$(find "$dir/corpus" -type f | wc -l)
  echo "fuzz: $t ok: $(final_stat number_of_executed_units) execs" \
    "($(final_stat average_exec_per_sec)/s), cov $cov, ft $ft, corpus $seeds seeds +" \
    "$files found, peak rss $(final_stat peak_rss_mb) MB"
  if ((merge)); then
    local before
    before=$(find "$seeds_dir" -type f | wc -l)
    run_target "$build/tests/fuzz/$t" "${common[@]}" -merge=1 "$seeds_dir" "$dir/corpus" \
      >"$dir/merge.log" 2>&1
    echo "fuzz: merged into $seeds_dir: $before -> $(find "$seeds_dir" -type f | wc -l) inputs" \
      "(review and commit them)"
  fi
}

# The targets run side by side (one libFuzzer process each, single-threaded): a target's
# executions depend only on its seed and corpus, not on what runs beside it. Reports are
# printed in the targets' order once all are done.
mkdir -p "$out"
pids=()
for t in "${targets[@]}"; do
  fuzz_one "$t" >"$out/$t.report" 2>&1 &
  pids+=($!)
done
failed=()
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  wait "${pids[$i]}" || failed+=("$t")
  cat "$out/$t.report"
done

echo
if ((${#failed[@]})); then
  echo "fuzz: FAIL (${failed[*]}; seed $seed)"
  exit 1
fi
if ((explore)); then
  echo "fuzz: ok (${targets[*]}, explored ${seconds}s each, seed $seed)"
else
  echo "fuzz: ok (${targets[*]}, replay + $runs executions each from seed $seed)"
fi
