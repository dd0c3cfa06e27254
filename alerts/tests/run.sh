#!/usr/bin/env bash
# Checks the lockwarden alerting rules, runs their unit tests (alerts/tests/*_test.yml) with
# promtool, and checks that each alert's runbook_url anchor is its section of docs/runbooks.md.
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
promtool test rules alerts/tests/*_test.yml || status=1

# Every alert has a runbook_url ending in #<its name in lower case>, and docs/runbooks.md has
# that section (a `## <name>` heading: the agent's /runbooks page gives it that id).
sections=$(sed -n 's/^## \(.*\)$/\1/p' docs/runbooks.md | tr 'A-Z' 'a-z')
links=$(awk '
  /^ *- alert:/ { if (name != "" && !linked) print name, "-"; name = $3; linked = 0 }
  /^ *runbook_url:/ { n = split($0, parts, "#"); anchor = parts[n]; sub(/[\047"].*$/, "", anchor)
                      print name, anchor; linked = 1 }
  END { if (name != "" && !linked) print name, "-" }' alerts/lockwarden.rules.yml)
while read -r name anchor; do
  lower=$(tr 'A-Z' 'a-z' <<<"$name")
  if [[ $anchor != "$lower" ]]; then
    echo "alerts: $name: runbook_url anchor is \"$anchor\", want \"$lower\"" >&2
    status=1
  elif ! grep -qx "$lower" <<<"$sections"; then
    echo "alerts: $name: docs/runbooks.md has no \"## $name\" section" >&2
    status=1
  fi
done <<<"$links"
echo "alerts: runbook links of $(wc -l <<<"$links") alerts checked against docs/runbooks.md"

if ((status == 0)); then
  echo "alerts: PASS"
else
  echo "alerts: FAIL" >&2
fi
exit "$status"
