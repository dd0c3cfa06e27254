#!/usr/bin/env bash
# The Go client, checked the way a user gets it (clients/go/README.md#install), then its tests
# against the live agent at $LOCKWARDEN_SOCKET (clients/README.md#tests).
#
# Offline and from scratch: GOPROXY=off (the module requires nothing), and GOPATH, GOCACHE and
# the user's module are fresh under $LWTEST_WORKDIR; nothing is written into the source tree.
set -euo pipefail
client=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=${LWTEST_WORKDIR:-$(mktemp -d)}
export GOPATH=$work/gopath GOCACHE=$work/gocache GOPROXY=off GOFLAGS=-mod=mod GOENV=off \
  GOWORK=off GOTOOLCHAIN=local

cd "$client"
unformatted=$(gofmt -l .)
if [[ -n $unformatted ]]; then
  echo "gofmt -l: not formatted:" $unformatted >&2
  exit 1
fi
go vet ./...
echo "gofmt and go vet: clean"

# A new user's module, as README.md says: replace, go get, the README's example as main.go.
app=$work/app
rm -rf "$app"
mkdir -p "$app"
cd "$app"
go mod init example.com/app
go mod edit -replace=lockwarden/clients/go="$client"
go get lockwarden/clients/go/lockwarden
awk '/^```go$/ { inside = 1; next } inside && /^```$/ { exit } inside' "$client/README.md" \
  >main.go
go mod tidy
go vet ./...
go build -o app .
echo "a new module builds README.md's example against $client"
if [[ -n ${LOCKWARDEN_SOCKET:-} ]]; then
  ./app
fi

cd "$client"
go test -c -o "$work/lockwarden.test" ./lockwarden
# The test binary itself, so that its stdin and stdout are the harness's pipes.
cd lockwarden
exec "$work/lockwarden.test" -test.v -test.timeout=100s
