#!/usr/bin/env bash
# The Node client's tests against the live agent at $LOCKWARDEN_SOCKET (clients/README.md#tests).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec node lockwarden.test.js
