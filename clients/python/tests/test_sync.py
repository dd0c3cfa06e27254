"""Tests of the blocking client (lockwarden.Client) against a live agent with real masters (see
harness.py): run from the installed package by test.sh."""

import os
import threading
import time
import unittest

import lockwarden
from harness import (CONTROLLED, EVENT_S, HOLD_MS, TOKEN, WAIT_MS, control, masters_holding,
                     needs_harness, waiters)


class SyncTest(unittest.TestCase):
    def setUp(self):
        self.a = lockwarden.Client()
        self.b = lockwarden.Client()

    def tearDown(self):
        self.a.close()
        self.b.close()

    def test_acquire_and_release(self):
        with self.a.lock("py:basic", ttl_ms=10000, wait_ms=WAIT_MS) as lock:
            self.assertRegex(lock.token, TOKEN)
            self.assertGreater(lock.validity_ms, 5000)
            self.assertEqual([l["resource"] for l in self.a.held()], ["py:basic"])
            if CONTROLLED:
                self.assertEqual(masters_holding("py:basic"), 5)
        self.assertTrue(lock.released)
        self.assertEqual(self.a.held(), [])
        if CONTROLLED:
            self.assertEqual(masters_holding("py:basic"), 0)

    def test_semaphore_permits_k_holders_and_refuses_another_size(self):
        first = self.a.acquire("py:pool", ttl_ms=10000, wait_ms=WAIT_MS, permits=2)
        second = self.b.acquire("py:pool", ttl_ms=10000, wait_ms=WAIT_MS, permits=2)
        self.assertEqual((first.mode, second.mode), ("permit", "permit"))
        self.assertEqual({first.permit, second.permit}, {0, 1})
        with lockwarden.Client() as third:
            with self.assertRaises(lockwarden.LockError) as cm:
                third.acquire("py:pool", ttl_ms=10000, wait_ms=0, permits=2)
            self.assertEqual(cm.exception.code, "timeout")
            with self.assertRaises(lockwarden.LockError) as cm:
                third.acquire("py:pool", ttl_ms=10000, wait_ms=0, permits=3)
            self.assertEqual(cm.exception.code, "kind_mismatch")
        first.release()
        second.release()

    def test_shared_holds_share_and_keep_the_exclusive_hold_out(self):
        with self.a.lock("py:cfg", ttl_ms=10000, wait_ms=WAIT_MS, shared=True) as r1:
            with self.b.lock("py:cfg", ttl_ms=10000, wait_ms=WAIT_MS, shared=True) as r2:
                self.assertEqual((r1.mode, r2.mode, r1.permit), ("shared", "shared", None))
                with lockwarden.Client() as writer:
                    with self.assertRaises(lockwarden.LockError) as cm:
                        writer.acquire("py:cfg", ttl_ms=10000, wait_ms=0)
                    self.assertEqual(cm.exception.code, "timeout")
        with self.assertRaises(lockwarden.LockError) as cm:
            self.a.acquire("py:cfg", permits=2, shared=True)
        self.assertEqual(cm.exception.code, "bad_request")
        self.assertIn("shared", cm.exception.message)

    def test_timeout_when_another_connection_holds_it(self):
        with self.a.lock("py:busy", ttl_ms=10000, wait_ms=WAIT_MS):
            with self.assertRaises(lockwarden.LockError) as cm:
                self.b.acquire("py:busy", ttl_ms=10000, wait_ms=200)
            self.assertEqual(cm.exception.code, "timeout")
            self.assertIn("py:busy", cm.exception.message)

    def test_asking_again_for_what_this_thread_holds_is_would_deadlock_or_reentrant(self):
        with self.a.lock("py:again", ttl_ms=10000, wait_ms=WAIT_MS) as lock:
            # Not reentrant: refused at once, not after the 30 s it would wait for itself.
            started = time.monotonic()
            with self.assertRaises(lockwarden.LockError) as cm:
                self.a.acquire("py:again", ttl_ms=10000, wait_ms=30000)
            self.assertEqual(cm.exception.code, "would_deadlock")
            self.assertLess(time.monotonic() - started, 10)
            # Reentrant: the same lock, one more acquire deep, released as many times.
            with self.a.lock("py:again", ttl_ms=10000, wait_ms=WAIT_MS, reentrant=True) as inner:
                self.assertIs(inner, lock)
                self.assertEqual(lock.depth, 2)
            self.assertFalse(lock.released)
            self.assertEqual(lock.depth, 1)
            with self.assertRaises(lockwarden.LockError) as cm:
                self.b.acquire("py:again", ttl_ms=10000, wait_ms=0)
            self.assertEqual(cm.exception.code, "timeout", "still held after the inner block")
        self.assertTrue(lock.released)
        self.b.acquire("py:again", ttl_ms=10000, wait_ms=WAIT_MS).release()

    def test_several_resources_are_taken_all_or_none_and_held_together(self):
        with self.a.lock_all(["py:set-b", "py:set-a"], ttl_ms=10000, wait_ms=WAIT_MS) as locks:
            self.assertEqual([l.resource for l in locks.locks], ["py:set-a", "py:set-b"])
            self.assertNotEqual(locks.locks[0].token, locks.locks[1].token)
            self.assertEqual(sorted(l["resource"] for l in self.a.held()), ["py:set-a", "py:set-b"])
            # All or none: b cannot have py:set-b, so it holds neither afterwards.
            with self.assertRaises(lockwarden.LockError) as cm:
                self.b.acquire_all(["py:set-c", "py:set-b"], ttl_ms=10000, wait_ms=200)
            self.assertEqual(cm.exception.code, "timeout")
            self.assertIn("py:set-b", cm.exception.message)
            self.assertEqual(self.b.held(), [])
        self.assertTrue(all(l.released for l in locks.locks))
        self.assertEqual(self.a.held(), [])

    def test_a_set_is_lost_when_one_of_its_locks_is_and_the_others_are_released(self):
        # Not renewed, and b extended to a minute: a expires first, and the set lets go of b.
        locks = self.a.acquire_all(["py:lose-a", "py:lose-b"], ttl_ms=2000, wait_ms=WAIT_MS)
        locks["py:lose-b"].extend(60000)
        self.assertIsNotNone(locks.wait_lost(EVENT_S))
        self.assertEqual(locks.lost, "expired")
        with self.assertRaises(lockwarden.LockLost):
            locks.check()
        # The set's thread releases b: awaited until the agent holds nothing and the lock says so.
        deadline = time.monotonic() + EVENT_S
        while self.a.held() or not locks["py:lose-b"].released:
            self.assertLess(time.monotonic(), deadline, "the set's other lock is still held")
            time.sleep(0.01)

    def test_another_thread_of_the_same_client_waits_instead(self):
        holder = self.a.acquire("py:threads", ttl_ms=10000, wait_ms=WAIT_MS)
        waiter, got = self.acquire_queued(self.a, "py:threads")
        holder.release()
        waiter.join(EVENT_S)
        self.assertFalse(waiter.is_alive(), "the other thread was never answered")
        self.assertNotIn("error", got)
        got["lock"].release()

    def acquire_queued(self, client, resource):
        """Starts an acquire of `resource` through `client` in a thread of its own (30 s wait)
        and returns once the agent lists it queued: the thread, and what it got ("lock" or
        "error")."""
        got = {}

        def acquire():
            try:
                got["lock"] = client.acquire(resource, ttl_ms=10000, wait_ms=30000)
            except lockwarden.LockError as e:
                got["error"] = e

        waiter = threading.Thread(target=acquire)
        waiter.start()
        deadline = time.monotonic() + EVENT_S
        while waiters(self.a.request("locks"), resource) != 1:
            self.assertLess(time.monotonic(), deadline, "nobody queued for %s" % resource)
            self.assertNotIn("error", got)
            time.sleep(0.01)
        return waiter, got

    def test_waiter_gets_the_lock_when_the_holder_releases(self):
        holder = self.a.acquire("py:queue", ttl_ms=10000, wait_ms=WAIT_MS)
        # The agent lists queued requests: release only once b is really waiting.
        waiter, got = self.acquire_queued(self.b, "py:queue")
        # b queued before now: held HOLD_MS longer, it has waited at least that long when granted.
        time.sleep(HOLD_MS / 1000)
        holder.release()
        waiter.join(EVENT_S)
        self.assertFalse(waiter.is_alive(), "b was never answered")
        self.assertNotIn("error", got)
        self.assertGreaterEqual(got["lock"].waited_ms, HOLD_MS)
        got["lock"].release()

    def test_renew_keeps_the_lock_past_its_ttl(self):
        # A ttl long enough that a renewal every ttl/3 on a loaded machine is never late; the
        # sleep is the point of the test: 3 ttls pass, and only renewals keep the lock.
        with self.a.lock("py:renew", ttl_ms=2000, wait_ms=WAIT_MS, renew=True) as lock:
            time.sleep(6.0)
            self.assertIsNone(lock.lost)
            self.assertEqual(self.a.held()[0]["renew"], True)
            with self.assertRaises(lockwarden.LockError) as cm:
                self.b.acquire("py:renew", ttl_ms=1000, wait_ms=200)
            self.assertEqual(cm.exception.code, "timeout")

    def test_explicit_extend(self):
        # 5 s: enough to still hold it when the extend arrives; 20 s after: over 10 s is the new ttl.
        with self.a.lock("py:extend", ttl_ms=5000, wait_ms=WAIT_MS) as lock:
            validity = lock.extend(ttl_ms=20000)
            self.assertGreater(validity, 10000)
            self.assertGreater(self.a.held()[0]["validity_ms"], 10000)
            if CONTROLLED:
                self.assertGreater(int(control("pttl py:extend")), 10000)

    def test_lock_without_renew_expires_and_is_reported_lost(self):
        lock = self.a.acquire("py:expire", ttl_ms=1000, wait_ms=WAIT_MS)
        self.assertEqual(lock.wait_lost(EVENT_S), "expired")
        with self.assertRaises(lockwarden.LockLost):
            lock.extend(1000)

    @needs_harness
    def test_lost_when_renewal_fails(self):
        seen = []
        with self.assertRaises(lockwarden.LockLost) as cm:
            with self.a.lock("py:lost", ttl_ms=2000, wait_ms=WAIT_MS, renew=True) as lock:
                lock.on_lost = lambda l: seen.append(l.lost)
                control("flush")  # the keys vanish: the next renewal finds the lock gone
                self.assertEqual(lock.wait_lost(EVENT_S), "renew_failed")
        self.assertEqual(cm.exception.code, "lost")
        self.assertEqual(seen, ["renew_failed"])
        self.assertEqual(self.a.held(), [])

    @needs_harness
    def test_no_quorum_when_a_majority_of_masters_is_down(self):
        control("kill-majority")
        try:
            with self.assertRaises(lockwarden.LockError) as cm:
                self.a.acquire("py:quorum", ttl_ms=1000, wait_ms=100)
            self.assertEqual(cm.exception.code, "no_quorum")
        finally:
            control("restore")
        self.a.acquire("py:quorum", ttl_ms=1000, wait_ms=WAIT_MS).release()

    def wait_resumed(self, hold, what):
        """Returns once the client's new connection holds `hold` again (it resumed it through
        the agent's next run); until then held() fails disconnected or lists nothing."""
        deadline = time.monotonic() + EVENT_S
        while True:
            try:
                if [h["token"] for h in self.a.held()] == [hold.token]:
                    return
            except lockwarden.LockError as e:
                self.assertEqual(e.code, "disconnected")  # still connecting again
            self.assertIsNone(hold.lost)
            self.assertLess(time.monotonic(), deadline, "the %s was never resumed" % what)
            time.sleep(0.02)

    @needs_harness
    def test_a_renewed_lock_is_resumed_after_the_agent_restarts(self):
        lock = self.a.acquire("py:resume", ttl_ms=4000, wait_ms=WAIT_MS, renew=True)
        seen = []
        lock.on_lost = lambda l: seen.append(l.lost)
        control("restart-agent")  # kill -9, then the next run on the same socket
        self.wait_resumed(lock, "lock")
        # Past the ttl: only the new run's renewals keep it on the masters.
        time.sleep(4.5)
        self.assertEqual(masters_holding("py:resume"), 5)
        self.assertEqual((lock.lost, seen), (None, []))
        lock.release()
        self.assertEqual(masters_holding("py:resume"), 0)

    @needs_harness
    def test_a_leadership_is_resumed_after_the_agent_restarts(self):
        leadership = self.a.campaign("py:lead-resume", "host-a:1", ttl_ms=4000, wait_ms=WAIT_MS)
        seen = []
        leadership.on_lost = lambda l: seen.append(l.lost)
        control("restart-agent")
        self.wait_resumed(leadership, "leadership")
        leader = self.a.leader("py:lead-resume")  # b held nothing: it did not reconnect
        assert leader is not None
        self.assertEqual((leader.value, leader.term), ("host-a:1", leadership.term))
        time.sleep(4.5)  # past the ttl: only the new run's renewals keep it
        self.assertEqual(masters_holding("py:lead-resume"), 5)
        self.assertEqual((leadership.lost, seen), (None, []))
        leadership.resign()
        self.assertIsNone(self.a.leader("py:lead-resume"))

    @needs_harness
    def test_a_lock_whose_keys_are_gone_is_reported_lost_after_the_agent_restarts(self):
        lock = self.a.acquire("py:resume-gone", ttl_ms=2000, wait_ms=WAIT_MS, renew=True)
        seen = []
        lock.on_lost = lambda l: seen.append(l.lost)
        control("flush")  # every key deleted...
        control("restart-agent")  # ...and at once the agent killed and started again
        # agent_lost: the next run answered not_held; renew_failed: the old run noticed first.
        self.assertIn(lock.wait_lost(EVENT_S), ("agent_lost", "renew_failed"))
        self.assertEqual(seen, [lock.lost])
        with self.assertRaises(lockwarden.LockLost):
            lock.check()

    def test_closing_the_connection_releases_its_locks(self):
        self.a.acquire("py:close", ttl_ms=10000, wait_ms=WAIT_MS)
        self.a.close()
        # Released once the agent has seen the connection end: well before b's wait runs out.
        self.b.acquire("py:close", ttl_ms=1000, wait_ms=WAIT_MS).release()
        with self.assertRaises(lockwarden.LockError) as cm:
            self.a.ping()
        self.assertEqual(cm.exception.code, "disconnected")

    def wait_queued(self, resource):
        """Returns once the agent lists a request of another connection waiting for `resource`."""
        deadline = time.monotonic() + EVENT_S
        while waiters(self.a.request("locks"), resource) != 1:
            self.assertLess(time.monotonic(), deadline, "nobody queued for %s" % resource)
            time.sleep(0.01)

    def test_election_hands_over_on_resign_with_a_higher_term(self):
        first = self.a.campaign("py:elect", "host-a:1", ttl_ms=10000, wait_ms=WAIT_MS)
        self.assertIsInstance(first.term, int)
        self.assertRegex(first.token, TOKEN)
        leader = self.b.leader("py:elect")
        assert leader is not None
        self.assertEqual((leader.value, leader.term), ("host-a:1", first.term))
        self.assertEqual(leader.pid, os.getpid())
        with lockwarden.Client() as watcher:
            observation = watcher.observe("py:elect")
            self.assertEqual(observation.leader.value, "host-a:1")
            seen = []
            observation.on_leader = seen.append
            got = {}
            waiter = threading.Thread(target=lambda: got.update(
                second=self.b.campaign("py:elect", "host-b:2", ttl_ms=10000, wait_ms=30000)))
            waiter.start()
            self.wait_queued("py:elect")
            self.assertNotIn("second", got)  # b waits while a leads
            first.resign()
            waiter.join(EVENT_S)
            self.assertFalse(waiter.is_alive(), "b was never elected")
            second = got["second"]
            self.assertGreater(second.term, first.term)
            self.assertEqual(self.a.leader("py:elect").value, "host-b:2")
            # Events come in term order: wait for the one naming b.
            while True:
                event = observation.next_event(EVENT_S)
                self.assertIsNotNone(event, "no leader event naming b")
                self.assertGreaterEqual(event.term, first.term)
                if event.leader and event.leader.value == "host-b:2":
                    break
            self.assertEqual(event.term, second.term)
            self.assertEqual((observation.term, observation.leader.term),
                             (second.term, second.term))
            self.assertIn(event, seen)
            watcher.unobserve("py:elect")
            with self.assertRaises(lockwarden.LockError) as cm:
                while observation.next_event(0) is not None:  # events from before unobserve
                    pass
            self.assertEqual(cm.exception.code, "not_held")
        with self.assertRaises(lockwarden.LockError) as cm:
            self.b.resign("py:elect", first.token)
        self.assertEqual(cm.exception.code, "not_held")
        with second:  # leaving the block resigns
            self.assertEqual(self.b.held()[0]["resource"], "py:elect")
        self.assertIsNone(self.a.leader("py:elect"))

    def test_detached_lease_outlives_its_connection(self):
        lease = self.a.acquire("py:lease", ttl_ms=60000, wait_ms=WAIT_MS, detach=True)
        self.assertTrue(lease.detached)
        self.a.close()
        self.assertIsNone(lease.lost)
        with self.assertRaises(lockwarden.LockError) as cm:
            self.b.acquire("py:lease", ttl_ms=1000, wait_ms=0)
        self.assertEqual(cm.exception.code, "timeout")
        self.assertGreater(self.b.extend("py:lease", lease.token, 30000), 15000)
        self.b.release("py:lease", lease.token)
        with self.assertRaises(lockwarden.LockError) as cm:
            self.b.release("py:lease", lease.token)
        self.assertEqual(cm.exception.code, "not_held")
        self.b.acquire("py:lease", ttl_ms=1000, wait_ms=0).release()

    def test_fenced_grants_carry_increasing_fences(self):
        with self.a.lock("py:fence", ttl_ms=10000, wait_ms=WAIT_MS) as plain:
            self.assertIsNone(plain.fence)
        with self.a.lock("py:fence", ttl_ms=10000, wait_ms=WAIT_MS, fence=True) as first:
            self.assertIsInstance(first.fence, int)
        with self.b.lock("py:fence", ttl_ms=10000, wait_ms=WAIT_MS, fence=True) as second:
            self.assertGreater(second.fence, first.fence)

    def test_observation_iterates_until_unobserved_or_observed_again(self):
        replaced = self.b.observe("py:iter")
        observation = self.b.observe("py:iter")  # starts it over: the first one ends
        self.assertEqual(replaced.ended, "observed again")
        self.assertEqual(list(replaced), [])
        self.assertIsNone(observation.leader)
        elected = threading.Event()
        observation.on_leader = lambda event: event.leader and elected.set()
        leadership = self.a.campaign("py:iter", "host-a:1", ttl_ms=10000, wait_ms=WAIT_MS)
        self.assertTrue(elected.wait(EVENT_S), "no leader event")
        observation.unobserve()
        seen = list(observation)  # the events queued before unobserve, then the end
        self.assertEqual(observation.ended, "unobserved")
        self.assertEqual(seen[-1].leader.value, "host-a:1")
        self.assertEqual(observation.term, leadership.term)
        with self.assertRaises(lockwarden.LockError) as cm:
            self.b.unobserve("py:iter")
        self.assertEqual(cm.exception.code, "not_held")
        leadership.resign()
        self.assertTrue(leadership.released)
        self.assertIsNone(self.b.leader("py:iter"))
