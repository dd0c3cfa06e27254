"""How `async with lock:` of lockwarden.aio reacts to a loss and to cancellations (the rules in
lockwarden.aio's doc), wherever the block waits. The loss is delivered the way the client's
reader delivers it (Lock._mark_lost, on the event loop while the block's task is suspended),
to a lock of a stand-in client that only records releases, so that each case is exact."""

import asyncio
import sys
import unittest

import lockwarden
from lockwarden.aio import Lock

COUNTED = sys.version_info >= (3, 11)  # asyncio counts cancellation requests (Task.cancelling)
FOREVER = 10.0  # what a block waits for, cut short by the loss or the cancellation


class StandIn:
    """What a Lock needs of its client: release, and a session to forget it in."""

    def __init__(self):
        self.released = []
        self._session = self

    def forget(self, lock):
        pass

    def release_resuming(self, lock):
        return False  # nothing here waits for a resume

    async def release(self, resource, token):
        await asyncio.sleep(0)  # a release is a round trip: it awaits
        self.released.append(token)


def new_lock(client):
    return Lock(client, "r", {"token": "t" * 40, "validity_ms": 1000})


async def not_past(awaitable):
    """Awaits what a block waits for, which a loss or a cancellation must cut short."""
    await awaitable
    raise AssertionError("the block was not interrupted")


async def wait_in_sleep():
    await not_past(asyncio.sleep(FOREVER))


async def wait_in_subtask():
    await not_past(asyncio.ensure_future(asyncio.sleep(FOREVER)))


async def wait_in_gather():
    await not_past(asyncio.gather(asyncio.sleep(FOREVER), asyncio.sleep(FOREVER)))


async def wait_in_wait_for():
    await not_past(asyncio.wait_for(asyncio.sleep(FOREVER), FOREVER))


async def wait_in_shield():
    await not_past(asyncio.shield(asyncio.sleep(FOREVER)))


async def wait_swallowing_the_cancellation():
    try:
        await not_past(asyncio.sleep(FOREVER))
    except asyncio.CancelledError:
        pass


class BlockTest(unittest.IsolatedAsyncioTestCase):
    async def run_block(self, waits, *actions):
        """Runs `async with lock: await waits()` in a task, then does `actions` ("loss",
        "cancel") at once, in that order; returns the lock and what the task ended with."""
        client = StandIn()
        lock = new_lock(client)
        entered = asyncio.Event()

        async def block():
            async with lock:
                entered.set()
                await waits()

        task = asyncio.ensure_future(block())
        await entered.wait()
        await asyncio.sleep(0)  # the block is suspended in waits()
        for action in actions:
            if action == "loss":
                lock._mark_lost("renew_failed")
            else:
                task.cancel()
        try:
            await task
            return lock, None
        except (asyncio.CancelledError, lockwarden.LockError) as e:
            return lock, e

    async def test_a_loss_cancels_the_block_wherever_it_waits(self):
        for waits in (wait_in_sleep, wait_in_subtask, wait_in_gather,
                      wait_in_wait_for, wait_in_shield):
            with self.subTest(waits=waits):
                lock, ended = await self.run_block(waits, "loss")
                self.assertIsInstance(ended, lockwarden.LockLost)
                self.assertIs(ended.lock, lock)
                self.assertIsInstance(ended.__context__, asyncio.CancelledError)
                self.assertEqual(lock.client.released, [])  # lost: nothing to release

    async def test_a_block_that_swallows_the_cancellation_still_raises_lock_lost(self):
        lock, ended = await self.run_block(wait_swallowing_the_cancellation, "loss")
        self.assertIsInstance(ended, lockwarden.LockLost)

    async def test_a_cancellation_from_elsewhere_propagates(self):
        lock, ended = await self.run_block(wait_in_sleep, "cancel")
        self.assertIsInstance(ended, asyncio.CancelledError)
        self.assertEqual((lock.client.released, lock.released), (["t" * 40], True))
        for actions in (("cancel", "loss"), ("loss", "cancel")):
            with self.subTest(actions=actions):
                lock, ended = await self.run_block(wait_in_sleep, *actions)
                self.assertEqual(lock.lost, "renew_failed")
                # Before 3.11 a CancelledError leaving a block its loss cancelled is the loss's.
                self.assertIsInstance(ended, asyncio.CancelledError if COUNTED
                                      else lockwarden.LockLost)

    async def test_a_timeout_around_the_block_still_times_out(self):
        lock = new_lock(StandIn())

        async def block():
            async with lock:
                await asyncio.sleep(FOREVER)

        with self.assertRaises(asyncio.TimeoutError):
            if COUNTED:  # in this task: the timeout's cancellation is counted here
                async with asyncio.timeout(0.05):
                    await block()
            else:
                await asyncio.wait_for(block(), 0.05)
        self.assertTrue(lock.released)
        if COUNTED:
            self.assertEqual(asyncio.current_task().cancelling(), 0)

    async def test_a_lock_lost_before_its_block_does_not_run_it(self):
        lock = new_lock(StandIn())
        lock._mark_lost("expired")
        ran = False
        with self.assertRaises(lockwarden.LockLost):
            async with lock:
                ran = True
        self.assertFalse(ran)

    async def test_an_exception_of_the_block_propagates_after_the_release(self):
        lock = new_lock(StandIn())
        with self.assertRaises(ZeroDivisionError):
            async with lock:
                1 / 0
        self.assertEqual(lock.client.released, ["t" * 40])
