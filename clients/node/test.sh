#!/usr/bin/env bash
# The Node client's tests against the live agent at $LOCKWARDEN_SOCKET (clients/README.md#tests),
# run on the package as a user gets it: `npm pack`, then `npm install` of the tarball into a
# scratch project under $LWTEST_WORKDIR, where `require('lockwarden')` finds the installed copy.
# There, Debian's tsc checks the declarations (types-check.ts, against the pinned @types/node) and
# `node --test` runs tests/. Nothing is written into this directory.
#
# The harness reads `@@lw` requests on this script's stdout and answers on its stdin; `node --test`
# runs the tests in a child process with pipes of its own, so they open ours by name
# (LWTEST_REQUESTS, LWTEST_ANSWERS).
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=${LWTEST_WORKDIR:-$(mktemp -d)}/node
rm -rf "$work"
mkdir -p "$work/app"
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false

tarball=$(cd "$src" && npm pack --silent --pack-destination "$work" </dev/null | tail -n1)
types_node=$(node -p 'require(process.argv[1]).devDependencies["@types/node"]' "$src/package.json")
cd "$work/app"
echo '{ "name": "lockwarden-tests", "private": true }' >package.json
# The package alone needs nothing from the registry.
npm install --offline --no-audit --no-fund "$work/$tarball" </dev/null
# The type check's @types/node (pinned in package.json): from npm's cache when there (filled by
# `npm cache add @types/node@VERSION`), else from the registry.
npm install --prefer-offline --no-audit --no-fund --save-dev "@types/node@$types_node" </dev/null

cp -R "$src/tests" "$src/types-check.ts" "$src/tsconfig.json" .
# README.md's examples as they stand: the TypeScript one is compiled with types-check.ts, the
# JavaScript one parsed.
awk '/^```ts$/ { on = 1; next } /^```$/ { if (on) exit } on' "$src/README.md" >readme-example.ts
awk '/^```js$/ { on = 1; next } /^```$/ { if (on) exit } on' "$src/README.md" >readme-example.js
[[ -s readme-example.ts && -s readme-example.js ]]
node --check readme-example.js
echo '{ "extends": "./tsconfig.json", "files": ["types-check.ts", "readme-example.ts"] }' \
  >tsconfig.check.json
# Both ways TypeScript finds a package's types: "exports" (node16) and "types" (node).
tsc -p tsconfig.check.json
tsc -p tsconfig.check.json --module commonjs --moduleResolution node
echo "tsc: the declarations check (node16 and node resolution)"

export LWTEST_REQUESTS=/proc/$$/fd/1 LWTEST_ANSWERS=/proc/$$/fd/0  # $$: node, after exec
exec node --test --test-reporter=tap tests/lockwarden.test.js
