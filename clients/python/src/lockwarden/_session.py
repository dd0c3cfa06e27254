"""What both clients share beyond the wire protocol: the bookkeeping of one connection to the
agent (Session), and the behaviour of the Lock, Leadership and Observation they hand out that
does not depend on how a client waits (LockBase, LeadershipBase, ObservationBase). No I/O here.

A client sends the line `Session.start` returns, feeds every line it reads to
`Session.receive`, and calls `Session.end` once the connection is gone. Those return effects
(callables) for the client to run: the blocking client calls the Session under its mutex and
runs the effects after releasing it, so a user's callback never runs with the mutex held.
"""

from __future__ import annotations

import itertools
import logging
from functools import partial
from typing import (Any, Callable, ContextManager, Dict, Generic, List, Optional, Tuple, Type,
                    TypeVar)

from ._protocol import (Code, Hold, Json, LeaderEvent, LockError, LockLost, ObservationState,
                        disconnected_reply, encode)

Effect = Callable[[], None]

_log = logging.getLogger("lockwarden")

C = TypeVar("C")  # the client a Lock or an Observation belongs to
T = TypeVar("T")


def call_back(callback: Optional[Callable[[T], Any]], arg: T, name: str, owner: object) -> None:
    """Calls a user's callback (`name` of `owner`) if set; what it raises is logged, as it runs
    in the client's reader."""
    if callback is None:
        return
    try:
        callback(arg)
    except Exception:
        _log.exception("%s of %r raised", name, owner)


class LockBase(Hold, Generic[C]):
    """A granted lock of `client` (see Hold for its fields), as both clients' Lock has it.

    `on_lost`, if set, is called with the lock from the client's reader (its thread, or its
    task) when the lock is lost; an exception it raises is logged. It must not wait for a reply
    of the same client: that reader reads them. `check()` raises LockLost once it happened."""

    def __init__(self, client: C, resource: str, reply: Json, detached: bool = False) -> None:
        super().__init__(resource, reply, detached)
        self.client = client
        self.on_lost: Optional[Callable[[Any], Any]] = None

    def _mark_lost(self, reason: str) -> None:
        if self._set_lost(reason):
            self._lost_now()
            call_back(self.on_lost, self, "on_lost", self)

    def _lost_now(self) -> None:
        """Wakes whatever the client has waiting for the loss (wait_lost, a block)."""
        raise NotImplementedError

    def _release_failed(self, error: LockError, block_raised: bool) -> None:
        """Leaving a block, its release failed with `error`. not_held (the lock was lost, its
        event is still on the way) and disconnected (the agent released it) mark it lost;
        another error is raised, unless the block is raising its own."""
        if error.code in (Code.NOT_HELD, Code.DISCONNECTED):
            self._mark_lost(error.code)
        elif not block_raised:
            raise error

    def _block_ended(self, block_raised: bool) -> None:
        """Leaving a block, released: a block that finished (raised nothing) but not under the
        lock raises LockLost, so that a loss is never silent."""
        if not block_raised and self.lost:
            raise LockLost(self)


class LeadershipBase(LockBase[C]):
    """A won campaign: this client leads `name` (also `resource`) with `term` while its
    connection lives. Lost like a lock (`lost`, `on_lost`, `wait_lost`, LockLost): stop acting as
    the leader at once. `release()`, `resign()` and leaving its block resign."""

    def __init__(self, client: C, reply: Json) -> None:
        super().__init__(client, reply["name"], reply)
        self.name: str = reply["name"]
        self.term: int = reply["term"]


L = TypeVar("L", bound=LockBase[Any])


class ObservationBase(ObservationState, Generic[C]):
    """Follows who leads an election for `client` (see ObservationState for `leader`, `term`
    and `ended`), as both clients' Observation does. Each pushed event is kept for the client's
    `next_event` and iteration (the last 16: see EventBuffer), and passed to `on_leader`, if
    set, from the client's reader (an exception it raises is logged; like on_lost, it must not
    wait for a reply of the client)."""

    _guard: ContextManager[Any]  # held while the events or `ended` change, and while taking

    def __init__(self, client: C, reply: Json) -> None:
        super().__init__(reply["name"], reply)
        self.client = client
        self.on_leader: Optional[Callable[[LeaderEvent], Any]] = None

    def _push(self, event: LeaderEvent) -> None:
        with self._guard:
            self._keep(event)
            self._wake()
        call_back(self.on_leader, event, "on_leader", self)

    def _end(self, reason: str) -> None:
        with self._guard:
            if self.ended is None:
                self.ended = reason
                self._wake()

    def _wake(self) -> None:
        """Wakes whoever waits for an event (called with _guard held)."""
        raise NotImplementedError


O = TypeVar("O", bound=ObservationBase[Any])


class Pending(Generic[L, O]):
    """A request sent and not answered yet. Once answered, `reply` is the reply (an error reply
    with code disconnected if the connection ended first), and `lock` or `observation` what an
    ok reply to an acquire, campaign or observe made."""

    def __init__(self, request_id: int, op: str, fields: Json,
                 on_done: Callable[[Pending[L, O]], None]) -> None:
        self.id = request_id
        self.op = op
        self.fields = fields
        self.on_done = on_done
        self.reply: Optional[Json] = None
        self.lock: Optional[L] = None
        self.observation: Optional[O] = None

    # What a client returns of an ok reply (the reply checked, by the client, to be ok).

    def answer(self) -> Json:
        assert self.reply is not None
        return self.reply

    def granted(self, kind: Type[T]) -> T:
        """The lock an acquire granted, or the leadership of a campaign: `kind`."""
        assert isinstance(self.lock, kind)
        return self.lock

    def observing(self) -> O:
        assert self.observation is not None
        return self.observation


class Session(Generic[L, O]):
    """One connection's state. Not thread-safe: the blocking client serialises the calls."""

    def __init__(self, make_lock: Callable[[str, Json, bool], L],
                 make_leadership: Callable[[Json], L],
                 make_observation: Callable[[Json], O]) -> None:
        """The factories make what an ok reply grants: a Lock (resource, reply, detached) for an
        acquire, a Leadership for a campaign, an Observation for an observe."""
        self._make_lock = make_lock
        self._make_leadership = make_leadership
        self._make_observation = make_observation
        self._ids = itertools.count(1)
        self._pending: Dict[int, Pending[L, O]] = {}
        self._locks: Dict[str, L] = {}  # token -> lock (detached leases are not here)
        self._observations: Dict[str, O] = {}  # election name -> observation
        self.closed: Optional[str] = None  # why, once the connection is gone
        self._unasked: Optional[str] = None  # an error line with no id (sent before a close)

    def start(self, op: str, fields: Json,
              on_done: Callable[[Pending[L, O]], None]) -> Tuple[Pending[L, O], bytes]:
        """Registers a request; returns it and the line to send. `on_done(pending)` is the
        effect that comes with its reply. Raises LockError(disconnected) once closed."""
        if self.closed is not None:
            raise LockError(Code.DISCONNECTED, self.closed)
        request_id = next(self._ids)
        line = encode(request_id, op, fields)
        pending: Pending[L, O] = Pending(request_id, op, fields, on_done)
        self._pending[request_id] = pending
        return pending, line

    def drop(self, pending: Pending[L, O]) -> None:
        """Forgets a request whose line could not be sent."""
        self._pending.pop(pending.id, None)

    def forget(self, lock: L) -> None:
        """Forgets a lock that was released: no `lost` is expected for it any more."""
        if self._locks.get(lock.token) is lock:
            del self._locks[lock.token]

    def receive(self, message: Json) -> List[Effect]:
        """Takes one line the agent sent (decoded)."""
        effects: List[Effect] = []
        event = message.get("event")
        if event is not None:
            if event == "lost":
                lock = self._locks.pop(str(message.get("token")), None)
                if lock is not None:
                    effects.append(partial(lock._mark_lost, str(message.get("reason", "lost"))))
            elif event == "leader":
                observation = self._observations.get(str(message.get("name")))
                if observation is not None:
                    effects.append(partial(observation._push, LeaderEvent.from_json(message)))
            return effects
        request_id = message.get("id")
        pending = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if pending is None:
            if message.get("ok") is False:  # e.g. too_many for max_connections, then the end
                self._unasked = "%s: %s" % (message.get("error"), message.get("message"))
            return effects
        if message.get("ok"):
            # Registered before anyone sees the reply, so that an event right behind it (`lost`,
            # `leader`) finds what it is for.
            if pending.op in ("acquire", "campaign"):
                if pending.op == "campaign":
                    lock = self._make_leadership(message)
                else:
                    lock = self._make_lock(str(message["resource"]), message,
                                           bool(pending.fields.get("detach")))
                pending.lock = lock
                if not lock.detached:  # no `lost` comes for a detached lease, nor ends it here
                    self._locks[lock.token] = lock
            elif pending.op == "observe":
                name = str(message["name"])
                observation = self._make_observation(message)
                pending.observation = observation
                replaced = self._observations.get(name)
                self._observations[name] = observation
                if replaced is not None:
                    effects.append(partial(replaced._end, "observed again"))
            elif pending.op == "unobserve":
                ended = self._observations.pop(str(pending.fields.get("name")), None)
                if ended is not None:
                    effects.append(partial(ended._end, "unobserved"))
        pending.reply = message
        effects.append(partial(pending.on_done, pending))
        return effects

    def end(self, reason: str) -> List[Effect]:
        """The connection is gone: every request waiting is answered disconnected, every lock
        is lost (disconnected), every observation ends. Later calls do nothing."""
        if self.closed is not None:
            return []
        self.closed = self._unasked or reason
        pending, self._pending = self._pending, {}
        locks, self._locks = self._locks, {}
        observations, self._observations = self._observations, {}
        effects: List[Effect] = []
        for request in pending.values():
            request.reply = disconnected_reply(self.closed)
            effects.append(partial(request.on_done, request))
        for lock in locks.values():
            effects.append(partial(lock._mark_lost, Code.DISCONNECTED))
        for observation in observations.values():
            effects.append(partial(observation._end, "disconnected"))
        return effects
