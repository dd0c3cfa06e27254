#!/usr/bin/env bash
# Prints, for each ctest log given (ctest --output-on-failure output), the tests it lists as
# failed and the last lines each of them printed, so a gate's summary at the end of a long log
# names what failed and why. Prints nothing for a log without failures.
#
#   bash tests/failed_tests.sh build/ctest-integration.log build-asan/ctest-unit.log
set -uo pipefail
lines=${LOCKWARDEN_FAILED_TAIL:-60}
for log in "$@"; do
  [[ -f $log ]] || continue
  if grep -q '^No tests were found' "$log"; then
    echo
    echo "==> no test matched in $log (a filter or a label that selects nothing)"
  fi
  grep -q '^The following tests FAILED:' "$log" || continue
  echo
  echo "==> failed in $log:"
  sed -n '/^The following tests FAILED:/,/^Errors while running CTest/p' "$log" | sed '1d;$d'
  # Each failed test's own output: from its result line to the next test's Start or result.
  awk -v tail="$lines" '
    function flush() {
      if (name == "") return
      printf "--- %s (last %d lines)\n", name, (n < tail ? n : tail)
      for (i = (n > tail ? n - tail + 1 : 1); i <= n; i++) print buf[i]
      name = ""; n = 0
    }
    /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: / {
      flush()
      if ($0 ~ /\*\*\*|Failed|Timeout|Exception/ && $0 !~ /Passed/) { name = $4; n = 0 }
      next
    }
    /^ *Start +[0-9]+: / { flush(); next }
    /^[0-9]+% tests passed/ { flush(); next }
    name != "" { buf[++n] = $0 }
    END { flush() }
  ' "$log"
done
exit 0
