#!/usr/bin/env bash
# The Python client's tests against the live agent at $LOCKWARDEN_SOCKET (clients/README.md#tests).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree
exec python3 test_lockwarden.py
