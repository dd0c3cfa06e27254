"""The bookkeeping of one connection to the agent, without I/O, shared by both clients: request
ids, the requests awaiting their replies, the locks that `lost` events are for and the
observations that `leader` events are for.

A client sends the line `start` returns, feeds every line it reads to `receive`, and calls
`end` once the connection is gone. Those return effects (callables) for the client to run: the
blocking client calls the Session under its mutex and runs the effects after releasing it, so a
user's callback never runs with the mutex held.
"""

from __future__ import annotations

import itertools
from functools import partial
from typing import Callable, Dict, Generic, List, Optional, Protocol, Tuple, TypeVar

from ._protocol import Code, Json, LeaderEvent, LockError, disconnected_reply, encode

Effect = Callable[[], None]


class Losable(Protocol):
    """What a client's Lock offers the Session."""

    @property
    def token(self) -> str: ...

    @property
    def detached(self) -> bool: ...

    def _mark_lost(self, reason: str) -> None: ...


class Observer(Protocol):
    """What a client's Observation offers the Session."""

    def _push(self, event: LeaderEvent) -> None: ...

    def _end(self, reason: str) -> None: ...


L = TypeVar("L", bound=Losable)
O = TypeVar("O", bound=Observer)


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


class Session(Generic[L, O]):
    """One connection's state. Not thread-safe: the blocking client serialises the calls."""

    def __init__(self, make_lock: Callable[[Pending[L, O], Json], L],
                 make_observation: Callable[[Json], O]) -> None:
        self._make_lock = make_lock
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
                lock = self._make_lock(pending, message)
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
