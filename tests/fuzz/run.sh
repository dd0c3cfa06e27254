#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan+UBSan) into build-fuzz/ and runs each for a
# bounded time on a fresh copy of its seed corpus. Fails if any target finds a crash, a
# sanitizer report, a violated invariant, a hang (> 10 s on one input) or runs out of memory.
#
#   bash tests/fuzz/run.sh [seconds-per-target]     # default 20
#   bash tests/fuzz/run.sh 600 config_fuzz          # one target, ten minutes
#
# Nothing generated is written into the repository: the working corpus, logs and any crash
# input (crash-<sha1>, timeout-..., oom-...) go to build-fuzz/out/<target>/ (or
# $LOCKWARDEN_FUZZ_OUT/<target>/). Reproduce a crash with
#   build-fuzz/tests/fuzz/<target> build-fuzz/out/<target>/crash-<sha1>
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

seconds=${1:-20}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(protocol_fuzz config_fuzz)
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "usage: bash tests/fuzz/run.sh [seconds-per-target] [target...]" >&2
  exit 64
fi
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
for t in "${targets[@]}"; do build_args+=(--target "$t"); done
echo "fuzz: building ${targets[*]}"
if ! cmake --build $build --parallel "$(nproc)" "${build_args[@]}" >$build/build.log 2>&1; then
  tail -40 $build/build.log
  echo "fuzz: build failed (full log: $build/build.log)" >&2
  exit 1
fi
for t in "${targets[@]}"; do
  [[ -x $build/tests/fuzz/$t ]] || { echo "fuzz: $t did not build" >&2; exit 1; }
done

# One of libFuzzer's final "stat::<name>: <value>" lines of the log in $dir.
final_stat() { grep -E "^stat::$1:" "$dir/fuzz.log" | awk '{print $2}' | tail -1; }

# A target's directory in tests/fuzz/corpus/ and its dictionary: protocol_fuzz -> protocol.
failed=()
for t in "${targets[@]}"; do
  name=${t%_fuzz}
  dir=$out/$t
  rm -rf "$dir"
  mkdir -p "$dir/corpus"
  cp tests/fuzz/corpus/"$name"/* "$dir/corpus/"
  seeds=$(find "$dir/corpus" -type f | wc -l)
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096
    -print_final_stats=1 -artifact_prefix="$dir/")
  [[ -f tests/fuzz/$name.dict ]] && args+=(-dict="tests/fuzz/$name.dict")
  echo
  echo "==> $t: ${seconds}s from $seeds seeds"
  rc=0
  # stdin is /dev/null: nothing the target is made to read may wait for a terminal.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    "$build/tests/fuzz/$t" "${args[@]}" "$dir/corpus" </dev/null >"$dir/fuzz.log" 2>&1 || rc=$?
  # libFuzzer's last status line: "#N DONE cov: C ft: F corp: K/S lim: L exec/s: E rss: R".
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$dir/fuzz.log" | tail -1 || true)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$done_line")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$done_line")
  files=$(find "$dir/corpus" -type f | wc -l)
  bytes=$(du -sb "$dir/corpus" | cut -f1)
  if ((rc != 0)) || [[ -z $done_line ]]; then
    echo "fuzz: $t FAILED (exit $rc):"
    grep -E -A1 'fuzz invariant violated|ERROR: [A-Za-z]+Sanitizer|ERROR: libFuzzer|runtime error' \
      "$dir/fuzz.log" | head -20 || true
    echo "--- the end of its log ($dir/fuzz.log):"
    grep -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)|Uses:' "$dir/fuzz.log" | tail -30
    ls "$dir"/crash-* "$dir"/timeout-* "$dir"/oom-* "$dir"/leak-* 2>/dev/null \
      | sed 's/^/fuzz: input to reproduce: /' || true
    failed+=("$t")
    continue
  fi
  execs=$(final_stat number_of_executed_units)
  echo "fuzz: $t ok: $execs execs ($(final_stat average_exec_per_sec)/s), cov $cov, ft $ft," \
    "corpus $files files ($bytes bytes, $seeds seeds), peak rss $(final_stat peak_rss_mb) MB"
done

echo
if ((${#failed[@]})); then
  echo "fuzz: FAIL (${failed[*]})"
  exit 1
fi
echo "fuzz: ok (${targets[*]}, ${seconds}s each)"
