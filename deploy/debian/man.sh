#!/usr/bin/env bash
# Generates the man pages of the Debian package from the CLI's own --help (help2man):
# lockwarden(1) and one page per subcommand, lockwarden-SUB(1), gzipped for /usr/share/man/man1.
#
#   bash deploy/debian/man.sh BINARY OUTDIR VERSION
#
# The subcommands are read from `lockwarden --help`, so a new one gets its page without an edit
# here. Reproducible: help2man's date is SOURCE_DATE_EPOCH (0 unless set), gzip -n.
set -euo pipefail
bin=$(realpath "$1") out=$2 version=$3
mkdir -p "$out"
rm -f "$out"/*.1.gz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-0}

# page NAME DESCRIPTION [SUBCOMMAND]: runs help2man on a wrapper named NAME that prints the help
# as `lockwarden [SUBCOMMAND] --help` would, with argv[0] "lockwarden" (not the build path).
page() {
  local name=$1 description=$2 sub=${3:-}
  printf '#!/usr/bin/env bash\nexec -a lockwarden %q %s "$@"\n' "$bin" "$sub" >"$work/$name"
  chmod +x "$work/$name"
  help2man --no-info --section=1 --version-string="$version" --name="$description" \
    --source="lockwarden $version" --manual="lockwarden manual" \
    --include=<(printf '[SEE ALSO]\n%s\n' "$see_also") \
    --output="$work/$name.1" "$work/$name"
  gzip -n -9 -c "$work/$name.1" >"$out/$name.1.gz"
}

# "  serve                       Run the agent in the foreground" under "Subcommands:".
mapfile -t subs < <("$bin" --help | sed -n '/^Subcommands:/,$p' | sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p')
((${#subs[@]} > 0)) || { echo "man.sh: no subcommands in $bin --help" >&2; exit 1; }
see_also=$(printf '.BR lockwarden-%s (1),\n' "${subs[@]}" | sed '$ s/,$//')
page lockwarden "distributed locks (Redlock over N Redis masters) for local apps"
see_also=".BR lockwarden (1)"
for sub in "${subs[@]}"; do
  description=$("$bin" --help | sed -n "s/^  $sub  *//p" | head -1)
  page "lockwarden-$sub" "$description" "$sub"
done
echo "man.sh: $((${#subs[@]} + 1)) pages in $out"
