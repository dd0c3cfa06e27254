"""Tests of the clients' pure parts (lockwarden._protocol), and what they do without an agent."""

import os
import tempfile
import unittest

import lockwarden
import lockwarden.aio
from lockwarden import LeaderEvent
from lockwarden._protocol import EventBuffer

SIZE = 16  # as README.md says, and as the Node and Go clients keep


def event(term, missed=False):
    return LeaderEvent(name="e", leader=None, term=term, missed=missed)


class EventBufferTest(unittest.TestCase):
    def take_all(self, buffer):
        taken = []
        while len(buffer):
            taken.append(buffer.take())
        self.assertIsNone(buffer.take())
        return taken

    def test_keeps_every_event_up_to_its_size_in_order(self):
        buffer = EventBuffer()
        for term in range(1, SIZE + 1):
            buffer.push(event(term, missed=term == 3))  # the agent's own `missed` stays
        self.assertEqual(self.take_all(buffer),
                         [event(term, missed=term == 3) for term in range(1, SIZE + 1)])

    def test_one_more_drops_the_oldest_and_the_next_taken_says_missed(self):
        buffer = EventBuffer()
        last = SIZE + 4
        for term in range(1, last + 1):
            buffer.push(event(term))
        taken = self.take_all(buffer)
        self.assertEqual([e.term for e in taken], list(range(5, last + 1)))
        self.assertEqual([e.missed for e in taken], [True] + [False] * (SIZE - 1))

    def test_events_taken_meanwhile_make_room(self):
        buffer = EventBuffer()
        for term in range(1, SIZE + 1):
            buffer.push(event(term))
        self.assertEqual(buffer.take(), event(1))
        buffer.push(event(SIZE + 1))  # fits: nothing dropped
        buffer.push(event(SIZE + 2))  # drops term 2: term 3 is taken next, missed
        taken = self.take_all(buffer)
        self.assertEqual([e.term for e in taken], list(range(3, SIZE + 3)))
        self.assertEqual(taken[0], event(3, missed=True))
        self.assertFalse(any(e.missed for e in taken[1:]))


class UnreachableTest(unittest.IsolatedAsyncioTestCase):
    """An agent that cannot be reached: the error says which socket was tried (it said only
    `[Errno 2] No such file or directory`)."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "no-agent.sock")

    def tearDown(self):
        self.dir.cleanup()

    def check(self, error):
        self.assertIn(self.path, str(error))
        self.assertIn("cannot connect to the lockwarden agent", str(error))
        self.assertEqual(error.filename, self.path)

    def test_the_error_names_the_socket(self):
        with self.assertRaises(FileNotFoundError) as raised:
            lockwarden.Client(self.path)
        self.check(raised.exception)

    async def test_the_aio_error_names_the_socket(self):
        with self.assertRaises(FileNotFoundError) as raised:
            await lockwarden.aio.connect(self.path)
        self.check(raised.exception)
