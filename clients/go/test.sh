#!/usr/bin/env bash
# The Go client's tests against the live agent at $LOCKWARDEN_SOCKET (clients/README.md#tests):
# offline (go.mod requires nothing), with throwaway caches under $LWTEST_WORKDIR.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
work=${LWTEST_WORKDIR:-$(mktemp -d)}
export GOCACHE=$work/gocache GOPATH=$work/gopath GOPROXY=off GOTOOLCHAIN=local GOENV=off
go test -c -o "$work/lockwarden.test" ./lockwarden
# The test binary itself, so that its stdin and stdout are the harness's pipes.
cd lockwarden
exec "$work/lockwarden.test" -test.v -test.timeout=100s
