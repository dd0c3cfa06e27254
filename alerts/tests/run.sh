#!/usr/bin/env bash
# Checks the lockwarden alerting rules and runs their unit tests with promtool.
#
#   bash alerts/tests/run.sh
#
# Needs promtool (Debian: apt-get install prometheus). Exits non-zero if a check or a test fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"

if ! command -v promtool >/dev/null 2>&1; then
  echo "alerts: promtool not found in PATH; install it with: apt-get install prometheus (Debian package \`prometheus\`)" >&2
  exit 1
fi

echo "alerts: $(promtool --version 2>&1 | head -n 1)"
status=0
promtool check rules alerts/lockwarden.rules.yml || status=1
promtool test rules alerts/tests/lockwarden_test.yml || status=1

if ((status == 0)); then
  echo "alerts: PASS"
else
  echo "alerts: FAIL" >&2
fi
exit "$status"
