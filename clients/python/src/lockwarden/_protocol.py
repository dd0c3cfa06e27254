"""The agent's wire protocol (docs/protocol.md, docs/elections.md) as pure code shared by the
blocking client (lockwarden.Client) and the asyncio one (lockwarden.aio.Client): the request
lines they send, how a reply becomes a result or a LockError, and the state of a granted hold
and of an observation. Nothing here does I/O or takes a lock.

Fields are sent as given: the agent validates every one of them and answers `bad_request`
naming the field, which the clients raise as LockError.
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Deque, Dict, Final, List, Mapping, Optional, Sequence

Json = Dict[str, Any]
"""A decoded JSON object: a reply, an event, or the fields of a request."""

DEFAULT_SOCKET: Final = "/run/lockwarden/lockwarden.sock"


def default_socket() -> str:
    """$LOCKWARDEN_SOCKET if set, else /run/lockwarden/lockwarden.sock."""
    return os.environ.get("LOCKWARDEN_SOCKET") or DEFAULT_SOCKET


def unreachable(path: str, error: OSError) -> OSError:
    """The error of a connect to the agent at `path` that failed with `error`: the same errno
    (so the same OSError subclass, e.g. FileNotFoundError), its message naming the socket, as
    `[Errno 2] cannot connect to the lockwarden agent: No such file or directory: '/run/...'`
    (the path is also its `filename`)."""
    if error.errno is None:
        return type(error)("cannot connect to the lockwarden agent at %r: %s" % (path, error))
    return OSError(error.errno, "cannot connect to the lockwarden agent: " +
                   (error.strerror or str(error)), path)


class Code:
    """The values of LockError.code. The agent's codes (docs/protocol.md#errors), then the two
    of the clients' own. Compare `error.code` with these (or the strings): a code added by a
    later agent arrives as its string."""

    TIMEOUT: Final = "timeout"  # another holder had it for all of wait_ms: contention
    NO_QUORUM: Final = "no_quorum"  # too few masters answered to decide: an outage
    NOT_HELD: Final = "not_held"  # that token holds nothing (any more), or not observed
    TOO_MANY: Final = "too_many"  # an agent limit (the message names it)
    FORBIDDEN: Final = "forbidden"  # no access rule lets this peer do it
    BAD_REQUEST: Final = "bad_request"  # a field missing, mistyped or out of range
    KIND_MISMATCH: Final = "kind_mismatch"  # the resource is in use as another kind or size
    WOULD_DEADLOCK: Final = "would_deadlock"  # this client holds it already: it would wait for itself
    SHUTTING_DOWN: Final = "shutting_down"  # the agent is stopping
    INTERNAL: Final = "internal"  # a bug in the agent
    DISCONNECTED: Final = "disconnected"  # the client's own: the connection ended
    LOST: Final = "lost"  # the client's own: raised as LockLost


AGENT_LOST: Final = "agent_lost"
"""The `lost` reason of a lock the client could not resume through the agent's next run (the
resume was refused, or the lock's validity ran out first)."""

RESUME_REFUSED: Final = frozenset((Code.NOT_HELD, Code.FORBIDDEN, Code.KIND_MISMATCH,
                                   Code.BAD_REQUEST))
"""The errors of a `resume` that will never work: the lock is lost. Any other is retried."""


class LockError(Exception):
    """An error reply of the agent, or of the client (codes `disconnected` and `lost`).
    `code` is the machine code to branch on (see Code), `message` is for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message


class LockLost(LockError):
    """The lock ended without being released (`lock.lost` says why): stop the work it
    protected, someone else may hold it now. Its code is `lost`."""

    def __init__(self, lock: Hold) -> None:
        super().__init__(Code.LOST, "lock on %r was lost (%s)" % (lock.resource, lock.lost))
        self.lock = lock


@dataclass(frozen=True)
class Leader:
    """Who leads an election (docs/elections.md#leader)."""

    value: str  # what its campaign announced, e.g. "host-a:8080"
    agent: str  # the id of the agent it campaigned through
    host: str  # that agent's host name
    pid: int  # the campaigning process
    since: int  # when it was elected, Unix ms on that agent's clock
    term: int  # its term: strictly increases from one leader to the next

    @classmethod
    def from_json(cls, record: Optional[Json]) -> Optional[Leader]:
        if record is None:
            return None
        return cls(value=record["value"], agent=record["agent"], host=record["host"],
                   pid=record["pid"], since=record["since"], term=record["term"])


@dataclass(frozen=True)
class LeaderEvent:
    """A change of leader pushed to an observer (docs/elections.md#observe)."""

    name: str  # the election
    leader: Optional[Leader]  # the new leader, None when nobody leads now
    term: int  # the new leader's term; with None, the term of the leader that is gone
    missed: bool  # True: changes before this one may have gone unseen

    @classmethod
    def from_json(cls, event: Json) -> LeaderEvent:
        return cls(name=event["name"], leader=Leader.from_json(event.get("leader")),
                   term=event["term"], missed=bool(event.get("missed")))


# Requests ------------------------------------------------------------------------------------


# Owners are whole numbers below 2**53 (docs/protocol.md#owners-and-reentrancy).
OWNER_MASK: Final = (1 << 53) - 1


def acquire_fields(resource: str, ttl_ms: Optional[int], wait_ms: int, renew: bool, fence: bool,
                   permits: Optional[int], shared: bool, detach: bool, owner: int = 0,
                   reentrant: bool = False) -> Json:
    """The fields of an acquire; flags that are off and options left None are not sent (the
    agent's defaults apply). owner: who in the client asks (its thread or task)."""
    fields: Json = {"resource": resource, "wait_ms": wait_ms}
    if owner:
        fields["owner"] = owner & OWNER_MASK
    if reentrant:
        fields["reentrant"] = True
    if ttl_ms is not None:
        fields["ttl_ms"] = ttl_ms
    if renew:
        fields["renew"] = True
    if fence:
        fields["fence"] = True
    if permits is not None:
        fields["permits"] = permits
    if shared:
        fields["shared"] = True
    if detach:
        fields["detach"] = True
    return fields


def acquire_all_fields(resources: Sequence[str], fields: Json) -> Json:
    """An acquire's fields (acquire_fields, of any resource) made an acquire of `resources`, all
    or none (docs/protocol.md#several-resources-at-once)."""
    out = dict(fields)
    del out["resource"]
    out["resources"] = list(resources)
    return out


def token_fields(resource: str, token: str, ttl_ms: Optional[int] = None) -> Json:
    """The fields of a release (ttl_ms None) or an extend."""
    fields: Json = {"resource": resource, "token": token}
    if ttl_ms is not None:
        fields["ttl_ms"] = ttl_ms
    return fields


def resume_fields(resource: str, token: str, ttl_ms: Optional[int], renew: bool,
                  fence: Optional[int], permits: Optional[int], permit: Optional[int],
                  shared: bool, election: bool = False, owner: int = 0, depth: int = 1) -> Json:
    """The fields of a resume (docs/protocol.md#resume): the hold as its acquire asked for it
    (ttl_ms None: the agent's default) and as the grant answered (fence, permit); a
    leadership's (election) names its term as the fence."""
    fields: Json = {"resource": resource, "token": token}
    if election:
        fields["election"] = True
    if ttl_ms is not None:
        fields["ttl_ms"] = ttl_ms
    if renew:
        fields["renew"] = True
    if fence is not None:
        fields["fence"] = fence
    if permits is not None:
        fields["permits"] = permits
        if permit is not None:
            fields["permit"] = permit
    if shared:
        fields["shared"] = True
    if owner:
        fields["owner"] = owner
    if depth > 1:
        fields["depth"] = depth
    return fields


def campaign_fields(name: str, value: str, ttl_ms: Optional[int], wait_ms: Optional[int]) -> Json:
    fields: Json = {"name": name, "value": value}
    if ttl_ms is not None:
        fields["ttl_ms"] = ttl_ms
    if wait_ms is not None:
        fields["wait_ms"] = wait_ms
    return fields


def name_fields(name: str, token: Optional[str] = None) -> Json:
    """The fields of a leader, observe or unobserve (token None), or a resign."""
    fields: Json = {"name": name}
    if token is not None:
        fields["token"] = token
    return fields


def encode(request_id: int, op: str, fields: Mapping[str, Any]) -> bytes:
    """One request line."""
    if "id" in fields or "op" in fields:
        raise ValueError("`id` and `op` are set by the client, not passed as fields")
    request: Json = {"id": request_id, "op": op}
    request.update(fields)
    return (json.dumps(request, ensure_ascii=False) + "\n").encode()


def decode(line: bytes) -> Json:
    """One line from the agent (a reply or an event). Raises ValueError if it is not a JSON
    object."""
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("the agent sent a line that is not a JSON object: %r" % line[:200])
    return message


def checked(reply: Json) -> Json:
    """The reply if it says ok, else raises its LockError (the agent's code and message)."""
    if not reply.get("ok"):
        raise LockError(str(reply.get("error", Code.INTERNAL)), str(reply.get("message", "")))
    return reply


def disconnected_reply(reason: str) -> Json:
    """The reply a request gets when the connection ends before its own."""
    return {"ok": False, "error": Code.DISCONNECTED, "message": reason}


# State of what a client holds ----------------------------------------------------------------


class Hold:
    """A granted hold as the acquire (or campaign) reply describes it; each client's Lock adds
    how it is released and how its loss is delivered.

    `mode` is "exclusive" (a mutex's hold, or the write hold), "shared" (a read hold) or
    "permit" (a semaphore's); `permit` is which permit (0..K-1) for a semaphore's, else None.
    `fence` is the fencing token when the acquire asked for one. `lost` is None while the lock
    is held, else why it ended without a release: renew_failed, expired, revoked (pushed by the
    agent), disconnected (the client was closed, or its connection ended for good), agent_lost
    (not resumed through the agent's next run), not_held (found gone when released).
    A detached lease (`detached` True) outlives the connection: nothing pushes `lost` for it and
    closing the client does not mark it lost; it ends at its ttl or when released by its token.
    """

    def __init__(self, resource: str, reply: Json, detached: bool) -> None:
        self.resource: str = resource
        self.token: str = reply["token"]
        self.validity_ms: int = reply["validity_ms"]
        self.waited_ms: int = reply.get("waited_ms", 0)
        self.fence: Optional[int] = reply.get("fence")
        self.mode: str = reply.get("mode", "exclusive")
        self.permit: Optional[int] = reply.get("permit")
        # A reentrant hold's acquires not yet released (docs/protocol.md#owners-and-reentrancy).
        self.depth: int = reply.get("depth", 1)
        self.detached: bool = detached
        self.lost: Optional[str] = None
        self.released: bool = False

    def check(self) -> None:
        """Raises LockLost if the lock was lost."""
        if self.lost:
            raise LockLost(self)

    def _set_lost(self, reason: str) -> bool:
        """Records the loss; False if the hold had already ended (lost or released)."""
        if self.lost or self.released:
            return False
        self.lost = reason
        return True

    def __repr__(self) -> str:
        state = "lost: %s" % self.lost if self.lost else "released" if self.released else "held"
        return "<%s %r %s (%s)>" % (type(self).__name__, self.resource, self.mode, state)


EVENT_BUFFER: Final = 16
"""How many events an observation keeps for a slow reader (as the Node and Go clients)."""


class EventBuffer:
    """The events pushed to an observation and not taken yet, oldest first: at most `size`.
    One more drops the oldest kept, and the one taken next then says `missed` (the events taken
    before it may not be every change)."""

    def __init__(self, size: int = EVENT_BUFFER) -> None:
        self._events: Deque[LeaderEvent] = deque()
        self._size = size

    def push(self, event: LeaderEvent) -> None:
        self._events.append(event)
        if len(self._events) > self._size:
            self._events.popleft()
            self._events[0] = replace(self._events[0], missed=True)

    def take(self) -> Optional[LeaderEvent]:
        """The oldest event kept, taken out; None if there is none."""
        return self._events.popleft() if self._events else None

    def __len__(self) -> int:
        return len(self._events)


class ObservationState:
    """What an observer knows of an election: `leader` (None: nobody leads) and `term` (None
    until one is known), updated by each LeaderEvent as it is pushed, and the events not taken
    yet. `ended` is None while the observation runs, else why it stopped: unobserved, observed
    again (a newer observation of the name replaced it) or disconnected."""

    def __init__(self, name: str, reply: Json) -> None:
        self.name: str = name
        self.leader: Optional[Leader] = Leader.from_json(reply.get("leader"))
        self.term: Optional[int] = self.leader.term if self.leader else None
        self.ended: Optional[str] = None
        self._events = EventBuffer()

    def _keep(self, event: LeaderEvent) -> None:
        self.leader = event.leader
        self.term = event.term
        self._events.push(event)

    def _ready(self) -> bool:
        """Whether taking need not wait: an event is kept, or the observation ended."""
        return len(self._events) > 0 or self.ended is not None

    def _take(self) -> Optional[LeaderEvent]:
        """The next event, taken out; None if none is kept. Once the observation ended and no
        event is left, raises LockError: not_held (unobserved, observed again) or
        disconnected."""
        event = self._events.take()
        if event is None and self.ended is not None:
            code = Code.DISCONNECTED if self.ended == "disconnected" else Code.NOT_HELD
            raise LockError(code, "observation of %r ended (%s)" % (self.name, self.ended))
        return event

    def _take_iterated(self) -> Optional[LeaderEvent]:
        """As _take, once _ready(), for iteration: None (the end of the iteration) where _take
        raises not_held; disconnected is raised."""
        try:
            return self._take()
        except LockError as e:
            if e.code == Code.DISCONNECTED:
                raise
            return None

    def __repr__(self) -> str:
        return "<%s of %r (%s)>" % (type(self).__name__, self.name, self.ended or "running")


def validity_of(reply: Json) -> int:
    """The validity_ms of an `extend` reply."""
    return int(reply["validity_ms"])


def leader_of(reply: Json) -> Optional[Leader]:
    """The leader of a `leader` reply."""
    return Leader.from_json(reply.get("leader"))


def locks_of(reply: Json) -> List[Json]:
    """The entries of a `held` or `locks` reply."""
    return list(reply["locks"])
