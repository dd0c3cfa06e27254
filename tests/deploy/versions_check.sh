#!/usr/bin/env bash
# The agent and every client package carry one version: the project's (CMakeLists.txt), which
# the Debian package and `lockwarden --version` take. (The Python package's __version__ comes
# from its installed metadata, i.e. pyproject.toml.) Registered in ctest as `versions_agree`.
#
#   bash tests/deploy/versions_check.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
want=$(sed -n 's/^project(lockwarden VERSION \([0-9.]*\) .*/\1/p' CMakeLists.txt)
[[ -n $want ]] || { echo "versions: no version in CMakeLists.txt's project()" >&2; exit 1; }
declare -A found=(
  [clients/python/pyproject.toml]=$(sed -n 's/^version = "\(.*\)"$/\1/p' clients/python/pyproject.toml)
  [clients/node/package.json]=$(node -p 'require("./clients/node/package.json").version')
  [clients/node/package-lock.json]=$(node -p 'require("./clients/node/package-lock.json").version')
  [clients/java/pom.xml]=$(sed -n '0,/<version>/s/^  <version>\(.*\)<\/version>$/\1/p' \
    clients/java/pom.xml)
  [clients/java/build.sh]=$(sed -n 's/^version=\(.*\)$/\1/p' clients/java/build.sh)
)
status=0
for file in "${!found[@]}"; do
  if [[ ${found[$file]} != "$want" ]]; then
    echo "versions: $file says '${found[$file]}', CMakeLists.txt $want" >&2
    status=1
  fi
done
((status == 0)) && echo "versions: ${#found[@]} files agree on $want"
exit "$status"
