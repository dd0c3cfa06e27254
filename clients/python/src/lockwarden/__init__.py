"""Client for the lockwarden agent's Unix socket (docs/protocol.md): locks, semaphores,
read-write locks, leader elections and detached leases, held through the agent on a quorum of
Redis masters. Standard library only.

    import lockwarden

    with lockwarden.Client() as client:
        with client.lock("db/migrations", ttl_ms=30000, wait_ms=5000, renew=True) as lock:
            migrate(stop_if=lambda: lock.lost)

This module is the blocking client (a Client may be shared by threads); lockwarden.aio is the
asyncio one. Both raise LockError (`code`, `message`) and LockLost, and describe leaders with
Leader and LeaderEvent.
"""

from ._protocol import (DEFAULT_SOCKET, Code, Leader, LeaderEvent, LockError, LockLost,
                        default_socket)
from ._sync import Client, Leadership, Lock, LockSet, Observation

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lockwarden")
except PackageNotFoundError:  # not installed (e.g. src/ put on sys.path by hand)
    __version__ = "0+unknown"

__all__ = ["Client", "Lock", "LockSet", "Leadership", "Observation", "LockError", "LockLost", "Code",
           "Leader", "LeaderEvent", "DEFAULT_SOCKET", "default_socket", "__version__"]
