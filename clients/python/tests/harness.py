"""What the test suites share: the harness's controls and the test timing constants.

The suites run against a live agent at $LOCKWARDEN_SOCKET. Run by
tests/integration/clients_test.cc (through test.sh), which starts 5 redis-server masters and the
agent and sets LWTEST_CONTROL=stdio: a test that needs the masters changed (or the agent
restarted) prints
`@@lw <action>` on stdout and reads the harness's answer from stdin (clients/README.md#tests).
Run by hand without LWTEST_CONTROL, those tests are skipped.
"""

from __future__ import annotations

import os
import sys
import unittest
from typing import Any, Callable, TypeVar

CONTROLLED = os.environ.get("LWTEST_CONTROL") == "stdio"
# These tests must pass the same way on a loaded machine (and against an ASan-built agent), so
# nothing here depends on how fast anything is: an acquire that must succeed waits (a free lock is
# granted at once; the wait only lets the agent retry when a master answered too slowly), an
# event is awaited with a generous deadline (EVENT_S; only a failing test waits it out), and a
# validity is only checked to come from the ttl asked for (more than half of it), not to the ms.
WAIT_MS = 10000
EVENT_S = 15.0
HOLD_MS = 50  # how long a queued waiter is kept waiting: its waited_ms is at least this
TOKEN = "^[0-9a-f]{40}$"

F = TypeVar("F", bound=Callable[..., Any])


def control(action: str) -> str:
    """Asks the harness to act on the masters; returns its answer's value ("ok" is checked)."""
    sys.stdout.write("@@lw %s\n" % action)
    sys.stdout.flush()
    answer = sys.stdin.readline().strip()
    if not answer.startswith("ok"):
        raise AssertionError("harness could not %s: %r" % (action, answer))
    return answer[3:]


def masters_holding(resource: str) -> int:
    return int(control("count " + resource))


def needs_harness(test: F) -> F:
    skip: Callable[[F], F] = unittest.skipUnless(CONTROLLED,
                                                 "needs the harness (LWTEST_CONTROL=stdio)")
    return skip(test)


def waiters(locks: Any, resource: str) -> int:
    """How many requests the agent lists as queued for `resource` (a `locks` reply)."""
    return sum(entry["waiters"] for entry in locks["locks"] if entry["resource"] == resource)
