"""Takes a lock through the lockwarden agent at $LOCKWARDEN_SOCKET, works under it, and shows
how to tell the error codes apart:  python3 example.py [resource]
(after `pip install ./clients/python`; example_aio.py is the same with asyncio)."""

import sys
import time

import lockwarden
from lockwarden import Code


def main(resource: str) -> int:
    try:
        client = lockwarden.Client()  # $LOCKWARDEN_SOCKET or /run/lockwarden/lockwarden.sock
    except OSError as e:
        print("agent unreachable:", e, file=sys.stderr)
        return 69
    with client:  # closing the connection would release the lock too
        try:
            # Wait up to 5 s for another holder; the agent renews the lock while we are connected.
            with client.lock(resource, ttl_ms=3000, wait_ms=5000, renew=True) as lock:
                print("acquired %s (valid %d ms, waited %d ms)"
                      % (resource, lock.validity_ms, lock.waited_ms))
                lock.on_lost = lambda l: print("lock lost:", l.lost, file=sys.stderr)
                for step in (1, 2, 3):
                    lock.check()  # raises LockLost: stop before the next step
                    time.sleep(1)  # one step of real work
                    print("step", step, "done")
                # An explicit extension, for code that does not use renew.
                print("extended, valid %d ms" % lock.extend(ttl_ms=10000))
            print("released", resource)  # leaving the block released it
            return 0
        except lockwarden.LockLost:
            print("stopped: the lock was lost", file=sys.stderr)
            return 72
        except lockwarden.LockError as e:
            if e.code == Code.TIMEOUT:
                print("busy: someone else held %s for all 5 s; try later" % resource)
                return 75
            if e.code == Code.NO_QUORUM:
                print("lock service unavailable (no quorum of masters):", e.message,
                      file=sys.stderr)
                return 69
            print("error", e.code, e.message, file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "example:python"))
