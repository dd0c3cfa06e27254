"""The asyncio client: takes a lock through the lockwarden agent at $LOCKWARDEN_SOCKET, works
under it while following who leads an election, and tells the error codes apart:
python3 example_aio.py [resource]   (after `pip install ./clients/python`)."""

import asyncio
import sys

import lockwarden
import lockwarden.aio
from lockwarden import Code


async def work(step: int) -> None:
    await asyncio.sleep(1)  # one step of real work
    print("step", step, "done")


async def main(resource: str) -> int:
    try:
        client = await lockwarden.aio.connect()  # $LOCKWARDEN_SOCKET or the default path
    except OSError as e:
        print("agent unreachable:", e, file=sys.stderr)
        return 69
    async with client:  # closing the connection would release the lock too
        try:
            # Who leads "example:jobs", and every change while we work.
            observation = await client.observe("example:jobs")
            print("leader of example:jobs:", observation.leader)
            observation.on_leader = lambda event: print("new leader:", event.leader)
            # The agent renews the lock while we are connected. If it is lost anyway, the task
            # in the block is cancelled and the block raises LockLost.
            async with client.lock(resource, ttl_ms=3000, wait_ms=5000, renew=True) as lock:
                print("acquired %s (valid %d ms, waited %d ms)"
                      % (resource, lock.validity_ms, lock.waited_ms))
                for step in (1, 2, 3):
                    await work(step)
            print("released", resource)  # leaving the block released it
            await observation.unobserve()
            return 0
        except lockwarden.LockLost as e:
            print("stopped: the lock was lost (%s)" % e.lock.lost, file=sys.stderr)
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
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "example:python-aio")))
