"""Tests of both clients against a scripted stand-in for the agent (scripted.py), for what the
real agent cannot be made to do on cue: a reply that races the cancellation of its caller, a
line the client cannot read."""

import asyncio
import os
import threading
import unittest

import lockwarden
import lockwarden.aio
from harness import EVENT_S
from scripted import ScriptedAgent


def leader_event(term):
    return {"event": "leader", "name": "e", "term": term,
            "leader": {"value": "v%d" % term, "agent": "a", "host": "h", "pid": 1, "since": 0,
                       "term": term}}


def open_fds():
    return len(os.listdir("/proc/self/fd"))


class ScriptedSyncTest(unittest.TestCase):
    def connect(self):
        agent = ScriptedAgent()
        self.addCleanup(agent.close)
        client = lockwarden.Client(agent.path)
        self.addCleanup(client.close)
        agent.accept()
        return agent, client

    def acquire(self, agent, client):
        got = {}
        taker = threading.Thread(target=lambda: got.update(lock=client.acquire("r")))
        taker.start()
        agent.grant(agent.request())
        taker.join(EVENT_S)
        self.assertIn("lock", got)
        return got["lock"]

    def test_an_unreadable_line_ends_the_session(self):
        # The client gives the connection up, so that the agent ends the session and its locks
        # (they are lost, disconnected): none stays held and renewed for a client that no longer
        # reads. (No docstring: unittest -v would put "... ok" on a line of its own.)
        for line in (b"not json\n", b"[1]\n", b'{"event": "\xff"}\n'):
            with self.subTest(line=line):
                agent, client = self.connect()
                lock = self.acquire(agent, client)
                agent.send(line)
                self.assertEqual(lock.wait_lost(EVENT_S), "disconnected")
                agent.wait_end()
                with self.assertRaises(lockwarden.LockError) as cm:
                    client.ping()
                self.assertEqual(cm.exception.code, "disconnected")

    def test_an_observation_keeps_the_last_sixteen_events(self):
        agent, client = self.connect()
        observing = threading.Thread(target=lambda: got.update(observation=client.observe("e")))
        got = {}
        observing.start()
        agent.ok(agent.request(), name="e", leader=None)
        observing.join(EVENT_S)
        observation = got["observation"]
        pushed = threading.Event()
        observation.on_leader = lambda event: event.term == 20 and pushed.set()
        for term in range(1, 21):
            agent.send(leader_event(term))
        self.assertTrue(pushed.wait(EVENT_S), "the events did not come")
        unobserving = threading.Thread(target=observation.unobserve)
        unobserving.start()
        agent.ok(agent.request())
        unobserving.join(EVENT_S)
        events = list(observation)
        self.assertEqual([e.term for e in events], list(range(5, 21)))
        self.assertEqual([e.missed for e in events], [True] + [False] * 15)
        self.assertEqual((observation.term, observation.ended), (20, "unobserved"))

    def test_close_called_by_on_lost_closes_the_socket(self):
        before = open_fds()
        agent, client = self.connect()
        lock = self.acquire(agent, client)
        lock.on_lost = lambda _: client.close()  # from the client's reader thread
        agent.send({"event": "lost", "token": lock.token, "reason": "revoked"})
        agent.wait_end()
        client._reader.join(EVENT_S)  # the reader is done with the connection
        self.assertEqual(lock.lost, "revoked")
        agent.close()
        self.assertEqual(open_fds(), before)


class ScriptedAioTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.agent = ScriptedAgent()
        self.client = await lockwarden.aio.connect(self.agent.path)
        await asyncio.to_thread(self.agent.accept)

    async def asyncTearDown(self):
        await self.client.close()
        self.agent.close()

    async def request(self, missing="the client sent no request"):
        return await asyncio.to_thread(self.agent.request, missing)

    async def test_a_grant_whose_caller_is_cancelled_is_given_back(self):
        # Whether the caller is cancelled before the reply or after the reply resolved its wait
        # (but before it ran again), what the reply grants goes back to the agent.
        calls = (("acquire", lambda: self.client.acquire("r", wait_ms=1000), "release"),
                 ("campaign", lambda: self.client.campaign("e", "v"), "resign"),
                 ("observe", lambda: self.client.observe("e"), "unobserve"))
        for op, call, give_back in calls:
            for cancelled in ("before the reply", "after the reply"):
                case = "%s cancelled %s" % (op, cancelled)
                task = asyncio.ensure_future(call())
                request = await self.request()
                self.assertEqual(request["op"], op)
                if op == "observe":
                    reply = {"id": request["id"], "ok": True, "name": "e", "leader": None}
                else:
                    reply = {"id": request["id"], "ok": True, "token": "%040x" % request["id"],
                             "validity_ms": 1000, "resource": "r", "name": "e", "term": 1}
                if cancelled == "before the reply":
                    task.cancel()
                # What the reader does with the reply's line; then, in the same step (before the
                # task runs again), the cancellation.
                for effect in self.client._session.receive(reply):
                    effect()
                if cancelled == "after the reply":
                    task.cancel()
                with self.assertRaises(asyncio.CancelledError, msg=case):
                    await task
                back = await self.request("%s: nothing given back" % case)
                self.assertEqual(back["op"], give_back, case)
                if op == "observe":
                    self.assertEqual(back["name"], "e", case)
                else:
                    self.assertEqual(back["token"], reply["token"], case)
                self.agent.ok(back)
        ping = asyncio.ensure_future(self.client.ping())
        self.agent.ok(await self.request())
        await ping  # the request after the give-backs: each was sent once

    async def test_an_unreadable_line_ends_the_session(self):
        acquiring = asyncio.ensure_future(self.client.acquire("r"))
        self.agent.grant(await self.request())
        lock = await acquiring
        self.agent.send(b"not json\n")
        self.assertEqual(await lock.wait_lost(EVENT_S), "disconnected")
        await asyncio.to_thread(self.agent.wait_end)
        with self.assertRaises(lockwarden.LockError) as cm:
            await self.client.ping()
        self.assertEqual(cm.exception.code, "disconnected")

    async def test_an_observation_keeps_the_last_sixteen_events(self):
        observing = asyncio.ensure_future(self.client.observe("e"))
        self.agent.ok(await self.request(), name="e", leader=None)
        observation = await observing
        pushed = asyncio.Event()
        observation.on_leader = lambda event: event.term == 20 and pushed.set()
        for term in range(1, 21):
            self.agent.send(leader_event(term))
        await asyncio.wait_for(pushed.wait(), EVENT_S)
        unobserving = asyncio.ensure_future(observation.unobserve())
        self.agent.ok(await self.request())
        await unobserving
        events = [event async for event in observation]
        self.assertEqual([e.term for e in events], list(range(5, 21)))
        self.assertEqual([e.missed for e in events], [True] + [False] * 15)
        self.assertEqual((observation.term, observation.ended), (20, "unobserved"))
