"""Tests of the asyncio client (lockwarden.aio) against a live agent with real masters (see
harness.py): run from the installed package by test.sh."""

import asyncio
import os
import sys
import unittest

import lockwarden
import lockwarden.aio
from harness import (CONTROLLED, EVENT_S, HOLD_MS, TOKEN, WAIT_MS, control, masters_holding,
                     needs_harness, waiters)


class AioTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.a = await lockwarden.aio.connect()
        self.b = await lockwarden.aio.connect()

    async def asyncTearDown(self):
        await self.a.close()
        await self.b.close()

    async def wait_queued(self, resource):
        """Returns once the agent lists a request of another connection waiting for `resource`."""
        deadline = asyncio.get_running_loop().time() + EVENT_S
        while waiters(await self.a.request("locks"), resource) != 1:
            self.assertLess(asyncio.get_running_loop().time(), deadline,
                            "nobody queued for %s" % resource)
            await asyncio.sleep(0.01)

    async def wait_resumed(self, hold, what):
        """Returns once the client's new connection holds `hold` again (it resumed it through
        the agent's next run); until then held() fails disconnected or lists nothing."""
        deadline = asyncio.get_running_loop().time() + EVENT_S
        while True:
            try:
                if [h["token"] for h in await self.a.held()] == [hold.token]:
                    return
            except lockwarden.LockError as e:
                self.assertEqual(e.code, "disconnected")  # still connecting again
            self.assertIsNone(hold.lost)
            self.assertLess(asyncio.get_running_loop().time(), deadline,
                            "the %s was never resumed" % what)
            await asyncio.sleep(0.02)

    def restart_agent(self):
        """Asks the harness to kill the agent (kill -9) and start its next run on the same
        socket, in a thread of its own, so that the event loop (the client's keeper) runs
        meanwhile and a loss cancelling the test's block does not cancel it; its answer is read
        before the test ends, however it ends."""
        restarting = asyncio.ensure_future(asyncio.to_thread(control, "restart-agent"))
        self.addAsyncCleanup(asyncio.wait, [restarting])
        return restarting

    async def test_lock_block_acquires_and_releases(self):
        async with self.a.lock("pya:basic", ttl_ms=10000, wait_ms=WAIT_MS) as lock:
            self.assertRegex(lock.token, TOKEN)
            self.assertGreater(lock.validity_ms, 5000)
            self.assertEqual((lock.mode, lock.permit, lock.fence), ("exclusive", None, None))
            self.assertEqual([h["resource"] for h in await self.a.held()], ["pya:basic"])
            if CONTROLLED:
                self.assertEqual(masters_holding("pya:basic"), 5)
            with self.assertRaises(lockwarden.LockError) as cm:
                await self.b.acquire("pya:basic", ttl_ms=10000, wait_ms=200)
            self.assertEqual(cm.exception.code, "timeout")
            self.assertIn("pya:basic", cm.exception.message)
        self.assertTrue(lock.released)
        self.assertEqual(await self.a.held(), [])
        if CONTROLLED:
            self.assertEqual(masters_holding("pya:basic"), 0)

    async def test_a_task_asking_again_is_would_deadlock_or_reentrant_another_task_waits(self):
        async with self.a.lock("pya:again", ttl_ms=10000, wait_ms=WAIT_MS) as lock:
            with self.assertRaises(lockwarden.LockError) as cm:
                await self.a.acquire("pya:again", ttl_ms=10000, wait_ms=30000)
            self.assertEqual(cm.exception.code, "would_deadlock")
            async with self.a.lock("pya:again", ttl_ms=10000, wait_ms=WAIT_MS,
                                   reentrant=True) as inner:
                self.assertIs(inner, lock)
                self.assertEqual(lock.depth, 2)
            self.assertEqual((lock.depth, lock.released), (1, False))
            # Another task of the same client is another owner: it waits for the hold.
            other = asyncio.ensure_future(self.a.acquire("pya:again", ttl_ms=10000, wait_ms=30000))
            await self.wait_queued("pya:again")
        self.assertTrue(lock.released)
        await (await asyncio.wait_for(other, EVENT_S)).release()

    async def test_several_resources_are_taken_all_or_none_and_held_together(self):
        async with await self.a.acquire_all(["pya:set-b", "pya:set-a"], ttl_ms=10000,
                                            wait_ms=WAIT_MS) as locks:
            self.assertEqual([l.resource for l in locks.locks], ["pya:set-a", "pya:set-b"])
            with self.assertRaises(lockwarden.LockError) as cm:
                await self.b.acquire_all(["pya:set-a", "pya:set-c"], ttl_ms=10000, wait_ms=200)
            self.assertEqual(cm.exception.code, "timeout")
            self.assertEqual(await self.b.held(), [])
        self.assertTrue(all(l.released for l in locks.locks))

    async def test_connect_as_a_context_manager_closes(self):
        async with lockwarden.aio.connect() as client:
            lock = await client.acquire("pya:ctx", ttl_ms=10000, wait_ms=WAIT_MS)
            await client.ping()
        self.assertEqual(lock.lost, "disconnected")  # closing released it
        await (await self.b.acquire("pya:ctx", ttl_ms=1000, wait_ms=WAIT_MS)).release()
        with self.assertRaises(lockwarden.LockError) as cm:
            await client.ping()
        self.assertEqual(cm.exception.code, "disconnected")

    async def test_fenced_grants_carry_increasing_fences(self):
        async with self.a.lock("pya:fence", ttl_ms=10000, wait_ms=WAIT_MS, fence=True) as first:
            self.assertIsInstance(first.fence, int)
        async with await self.b.acquire("pya:fence", ttl_ms=10000, wait_ms=WAIT_MS,
                                        fence=True) as second:
            self.assertGreater(second.fence, first.fence)
        self.assertTrue(second.released)

    async def test_waiter_gets_the_lock_while_other_requests_are_answered(self):
        holder = await self.a.acquire("pya:queue", ttl_ms=10000, wait_ms=WAIT_MS)
        waiting = asyncio.ensure_future(
            self.b.acquire("pya:queue", ttl_ms=10000, wait_ms=30000))
        await self.wait_queued("pya:queue")
        await self.b.ping()  # answered while the acquire sent before it still waits
        self.assertFalse(waiting.done())
        await asyncio.sleep(HOLD_MS / 1000)  # b has waited at least HOLD_MS when granted
        await holder.release()
        lock = await asyncio.wait_for(waiting, EVENT_S)
        self.assertGreaterEqual(lock.waited_ms, HOLD_MS)
        await lock.release()

    async def test_a_grant_to_a_cancelled_acquire_is_given_back(self):
        holder = await self.a.acquire("pya:abandon", ttl_ms=10000, wait_ms=WAIT_MS)
        waiting = asyncio.ensure_future(
            self.b.acquire("pya:abandon", ttl_ms=60000, wait_ms=30000))
        await self.wait_queued("pya:abandon")
        waiting.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await waiting
        await holder.release()  # the agent grants b's request, which nobody awaits now
        # Released by b's client: a gets it well before the 60 s ttl of b's grant runs out.
        await (await self.a.acquire("pya:abandon", ttl_ms=1000, wait_ms=WAIT_MS)).release()
        self.assertEqual(await self.b.held(), [])

    async def test_renew_keeps_the_lock_past_its_ttl(self):
        # The sleep is the point of the test: 3 ttls pass, and only renewals keep the lock.
        async with self.a.lock("pya:renew", ttl_ms=2000, wait_ms=WAIT_MS, renew=True) as lock:
            await asyncio.sleep(6.0)
            self.assertIsNone(lock.lost)
            self.assertEqual((await self.a.held())[0]["renew"], True)
            with self.assertRaises(lockwarden.LockError) as cm:
                await self.b.acquire("pya:renew", ttl_ms=1000, wait_ms=200)
            self.assertEqual(cm.exception.code, "timeout")

    async def test_explicit_extend(self):
        async with self.a.lock("pya:extend", ttl_ms=5000, wait_ms=WAIT_MS) as lock:
            self.assertGreater(await lock.extend(ttl_ms=20000), 10000)
            self.assertGreater((await self.a.held())[0]["validity_ms"], 10000)
            if CONTROLLED:
                self.assertGreater(int(control("pttl pya:extend")), 10000)

    async def test_lock_without_renew_expires_and_is_reported_lost(self):
        lock = await self.a.acquire("pya:expire", ttl_ms=1000, wait_ms=WAIT_MS)
        self.assertEqual(await lock.wait_lost(EVENT_S), "expired")
        with self.assertRaises(lockwarden.LockLost):
            await lock.extend(1000)

    @needs_harness
    async def test_a_lost_lock_cancels_its_block_which_raises_lock_lost(self):
        seen = []
        finished = False
        with self.assertRaises(lockwarden.LockLost) as cm:
            async with self.a.lock("pya:lost", ttl_ms=2000, wait_ms=WAIT_MS, renew=True) as lock:
                lock.on_lost = lambda l: seen.append(l.lost)
                control("flush")  # the keys vanish: the next renewal finds the lock gone
                await asyncio.sleep(EVENT_S)  # cut short by the loss
                finished = True
        self.assertFalse(finished)
        self.assertIs(cm.exception.lock, lock)
        self.assertEqual((cm.exception.code, lock.lost), ("lost", "renew_failed"))
        self.assertIsInstance(cm.exception.__context__, asyncio.CancelledError)
        self.assertEqual(seen, ["renew_failed"])
        self.assertEqual(await self.a.held(), [])
        if sys.version_info >= (3, 11):
            self.assertEqual(asyncio.current_task().cancelling(), 0)

    @needs_harness
    async def test_a_cancellation_from_elsewhere_propagates_as_cancellation(self):
        entered = asyncio.Queue()

        async def work(resource, **options):
            async with self.a.lock(resource, wait_ms=WAIT_MS, **options) as lock:
                entered.put_nowait(lock)
                await asyncio.sleep(3 * EVENT_S)  # until cancelled

        task = asyncio.ensure_future(work("pya:outer", ttl_ms=60000))
        lock = await asyncio.wait_for(entered.get(), EVENT_S)
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        self.assertEqual((lock.released, lock.lost), (True, None))
        # Released on the way out: b gets it well before its 60 s ttl runs out.
        await (await self.b.acquire("pya:outer", ttl_ms=1000, wait_ms=WAIT_MS)).release()

        # Lost, and cancelled from elsewhere in the same instant: on_lost runs in the reader
        # task right after the loss's own cancellation, before the block's task runs again.
        task = asyncio.ensure_future(work("pya:outer-lost", ttl_ms=2000, renew=True))
        lock = await asyncio.wait_for(entered.get(), EVENT_S)
        lock.on_lost = lambda _: task.cancel()
        control("flush")  # the next renewal finds the lock gone
        if sys.version_info >= (3, 11):  # cancellations are counted: the outer one shows
            with self.assertRaises(asyncio.CancelledError):
                await asyncio.wait_for(task, EVENT_S)
        else:  # as documented: asyncio merges the two into the loss's
            with self.assertRaises(lockwarden.LockLost):
                await asyncio.wait_for(task, EVENT_S)
        self.assertEqual(lock.lost, "renew_failed")

    @needs_harness
    async def test_a_renewed_lock_is_resumed_after_the_agent_restarts(self):
        seen = []
        finished = False
        async with self.a.lock("pya:resume", ttl_ms=4000, wait_ms=WAIT_MS, renew=True) as lock:
            lock.on_lost = lambda l: seen.append(l.lost)
            await asyncio.shield(self.restart_agent())
            await self.wait_resumed(lock, "lock")
            # Past the ttl: only the new run's renewals keep it on the masters.
            await asyncio.sleep(4.5)
            self.assertEqual(masters_holding("pya:resume"), 5)
            finished = True
        self.assertTrue(finished)
        self.assertEqual((lock.released, lock.lost, seen), (True, None, []))
        self.assertEqual(masters_holding("pya:resume"), 0)

    @needs_harness
    async def test_a_leadership_is_resumed_after_the_agent_restarts(self):
        seen = []
        leadership = await self.a.campaign("pya:lead", "host-a:1", ttl_ms=4000, wait_ms=WAIT_MS)
        leadership.on_lost = lambda l: seen.append(l.lost)
        await asyncio.shield(self.restart_agent())
        await self.wait_resumed(leadership, "leadership")
        leader = await self.a.leader("pya:lead")  # b held nothing: it did not reconnect
        assert leader is not None
        self.assertEqual(leader.term, leadership.term)
        await asyncio.sleep(4.5)  # past the ttl: only the new run's renewals keep it
        self.assertEqual(masters_holding("pya:lead"), 5)
        self.assertEqual((leadership.lost, seen), (None, []))
        await leadership.resign()
        self.assertIsNone(await self.a.leader("pya:lead"))

    @needs_harness
    async def test_a_lock_whose_keys_are_gone_is_reported_lost_after_the_agent_restarts(self):
        seen = []
        finished = False
        with self.assertRaises(lockwarden.LockLost) as cm:
            async with self.a.lock("pya:resume-gone", ttl_ms=2000, wait_ms=WAIT_MS,
                                   renew=True) as lock:
                lock.on_lost = lambda l: seen.append(l.lost)
                control("flush")  # every key deleted...
                self.restart_agent()  # ...and at once the agent killed and started again
                await asyncio.sleep(EVENT_S)  # cut short by the loss
                finished = True
        self.assertFalse(finished)
        # agent_lost: the next run answered not_held; renew_failed: the old run noticed first.
        self.assertIn(lock.lost, ("agent_lost", "renew_failed"))
        self.assertEqual((cm.exception.lock, seen), (lock, [lock.lost]))

    async def test_semaphore_permits_k_holders_and_refuses_another_size(self):
        first = await self.a.acquire("pya:pool", ttl_ms=10000, wait_ms=WAIT_MS, permits=2)
        second = await self.b.acquire("pya:pool", ttl_ms=10000, wait_ms=WAIT_MS, permits=2)
        self.assertEqual((first.mode, second.mode), ("permit", "permit"))
        self.assertEqual({first.permit, second.permit}, {0, 1})
        async with lockwarden.aio.connect() as third:
            with self.assertRaises(lockwarden.LockError) as cm:
                await third.acquire("pya:pool", ttl_ms=10000, wait_ms=0, permits=2)
            self.assertEqual(cm.exception.code, "timeout")
            with self.assertRaises(lockwarden.LockError) as cm:
                await third.acquire("pya:pool", ttl_ms=10000, wait_ms=0, permits=3)
            self.assertEqual(cm.exception.code, "kind_mismatch")
            await first.release()
            async with third.lock("pya:pool", ttl_ms=10000, wait_ms=WAIT_MS, permits=2) as p:
                self.assertEqual(p.permit, first.permit)
        await second.release()

    async def test_shared_holds_share_and_keep_the_exclusive_hold_out(self):
        async with self.a.lock("pya:cfg", ttl_ms=10000, wait_ms=WAIT_MS, shared=True) as r1:
            async with self.b.lock("pya:cfg", ttl_ms=10000, wait_ms=WAIT_MS, shared=True) as r2:
                self.assertEqual((r1.mode, r2.mode, r1.permit), ("shared", "shared", None))
                async with lockwarden.aio.connect() as writer:
                    with self.assertRaises(lockwarden.LockError) as cm:
                        await writer.acquire("pya:cfg", ttl_ms=10000, wait_ms=0)
                    self.assertEqual(cm.exception.code, "timeout")
        with self.assertRaises(lockwarden.LockError) as cm:
            await self.a.acquire("pya:cfg", permits=2, shared=True)
        self.assertEqual(cm.exception.code, "bad_request")
        self.assertIn("shared", cm.exception.message)

    async def test_election_hands_over_and_observers_iterate_the_events(self):
        first = await self.a.campaign("pya:elect", "host-a:1", ttl_ms=10000, wait_ms=WAIT_MS)
        self.assertRegex(first.token, TOKEN)
        leader = await self.b.leader("pya:elect")
        self.assertEqual((leader.value, leader.term, leader.pid),
                         ("host-a:1", first.term, os.getpid()))
        async with lockwarden.aio.connect() as watcher:
            observation = await watcher.observe("pya:elect")
            self.assertEqual((observation.leader.value, observation.term),
                             ("host-a:1", first.term))
            campaigning = asyncio.ensure_future(
                self.b.campaign("pya:elect", "host-b:2", ttl_ms=10000, wait_ms=30000))
            await self.wait_queued("pya:elect")
            self.assertFalse(campaigning.done())  # b waits while a leads
            await first.resign()
            second = await asyncio.wait_for(campaigning, EVENT_S)
            self.assertGreater(second.term, first.term)
            self.assertEqual((await self.a.leader("pya:elect")).value, "host-b:2")

            async def until_b_leads():
                async for event in observation:  # in term order
                    self.assertGreaterEqual(event.term, first.term)
                    if event.leader is not None and event.leader.value == "host-b:2":
                        return event
                self.fail("the events ended")

            event = await asyncio.wait_for(until_b_leads(), EVENT_S)
            self.assertEqual((event.term, observation.term), (second.term, second.term))
            await observation.unobserve()
            async for event in observation:  # what came before unobserve, then the end
                pass
            self.assertEqual(observation.ended, "unobserved")
            with self.assertRaises(lockwarden.LockError) as cm:
                await observation.next_event(0)
            self.assertEqual(cm.exception.code, "not_held")
        with self.assertRaises(lockwarden.LockError) as cm:
            await self.b.resign("pya:elect", first.token)
        self.assertEqual(cm.exception.code, "not_held")
        async with second:  # leaving the block resigns
            self.assertEqual((await self.b.held())[0]["resource"], "pya:elect")
        self.assertIsNone(await self.a.leader("pya:elect"))

    async def test_an_observation_ends_with_its_connection(self):
        async with lockwarden.aio.connect() as watcher:
            observation = await watcher.observe("pya:watch")
        with self.assertRaises(lockwarden.LockError) as cm:
            async for _ in observation:
                pass
        self.assertEqual((cm.exception.code, observation.ended), ("disconnected", "disconnected"))

    async def test_detached_lease_outlives_its_connection(self):
        lease = await self.a.acquire("pya:lease", ttl_ms=60000, wait_ms=WAIT_MS, detach=True)
        self.assertTrue(lease.detached)
        await self.a.close()
        self.assertIsNone(lease.lost)
        with self.assertRaises(lockwarden.LockError) as cm:
            await self.b.acquire("pya:lease", ttl_ms=1000, wait_ms=0)
        self.assertEqual(cm.exception.code, "timeout")
        self.assertGreater(await self.b.extend("pya:lease", lease.token, 30000), 15000)
        await self.b.release("pya:lease", lease.token)
        with self.assertRaises(lockwarden.LockError) as cm:
            await self.b.release("pya:lease", lease.token)
        self.assertEqual(cm.exception.code, "not_held")
        await (await self.b.acquire("pya:lease", ttl_ms=1000, wait_ms=0)).release()
