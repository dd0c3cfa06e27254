"""What both clients share beyond the wire protocol: the bookkeeping of a client's connection
to the agent and of the locks it resumes through the agent's next run (Session), and the
behaviour of the Lock, Leadership and Observation they hand out that does not depend on how a
client waits (LockBase, LeadershipBase, ObservationBase). No I/O here.

A client sends the line `Session.start` returns, feeds every line it reads to
`Session.receive`, and calls `Session.end` once the connection is gone. Those return effects
(callables) for the client to run: the blocking client calls the Session under its mutex and
runs the effects after releasing it, so a user's callback never runs with the mutex held.

Resuming (docs/protocol.md#resume). When the connection ends unexpectedly (`end(resume=True)`),
the locks and leaderships it held (detached leases are not the connection's) are not lost at
once: they wait in the Session for a new connection to the agent's next run. The client's keeper
(a thread, or a task) asks `chores()` what is due and does it: connect again (then `reopen()`,
or `connect_failed()`), write the `resume` requests it started, write the `held` request that
keeps each renewed lock's validity current, and run the losses it found (a lock whose validity
ran out before its resume succeeded is lost, agent_lost). The Session calls `wake` (an effect)
when the keeper has new work.
"""

from __future__ import annotations

import itertools
import logging
import time
from functools import partial
from typing import (Any, Callable, ContextManager, Dict, Generic, List, Optional, Set, Tuple,
                    Type, TypeVar)

from ._protocol import (AGENT_LOST, RESUME_REFUSED, Code, Hold, Json, LeaderEvent, LockError,
                        LockLost, ObservationState, disconnected_reply, encode, resume_fields)

Effect = Callable[[], None]

RETRY_FIRST_S = 0.05  # the first pause between connects (or resume rounds), doubling...
RETRY_MAX_S = 0.5  # ...up to this
HELD_MIN_S = 0.1  # `held` is read every third of the smallest renewed ttl, at most this often

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
    task), or its keeper (a lock not resumed), when the lock is lost; an exception it raises
    is logged. It must not wait for a reply of the same client: that reader reads them.
    `check()` raises LockLost once it happened."""

    def __init__(self, client: C, resource: str, reply: Json, detached: bool = False) -> None:
        super().__init__(resource, reply, detached)
        self.client = client
        self.on_lost: Optional[Callable[[Any], Any]] = None
        # What a resume repeats of the acquire (_ttl_ms: of the last extend; None: the agent's
        # default), and the monotonic time (time.monotonic()) until which it is known valid.
        self._ttl_ms: Optional[int] = None
        self._renew = False
        self._permits: Optional[int] = None
        self._shared = False
        self._owner = 0
        self._valid_until = 0.0

    def _granted(self, asked: Json, sent: float) -> None:
        """Keeps what the acquire (fields `asked`, sent at `sent`) asked for; its validity
        counts from before the request was sent, less the wait the reply reports."""
        self._ttl_ms = asked.get("ttl_ms")
        self._renew = bool(asked.get("renew"))
        self._permits = asked.get("permits")
        self._shared = bool(asked.get("shared"))
        self._owner = int(asked.get("owner", 0))
        self._valid_until = sent + (self.validity_ms + self.waited_ms) / 1000

    def _ended(self) -> bool:
        return bool(self.lost) or self.released

    def _resume_fields(self) -> Json:
        # A lock released or lost meanwhile is resumed only to be given back: never renewed.
        return resume_fields(self.resource, self.token, self._ttl_ms,
                             self._renew and not self._ended(), self.fence, self._permits,
                             self.permit, self._shared, owner=self._owner,
                             depth=1 if self._ended() else self.depth)

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

    def _granted(self, asked: Json, sent: float) -> None:
        super()._granted(asked, sent)
        self._renew = True  # the agent renews every leadership: its validity is read

    def _resume_fields(self) -> Json:
        return resume_fields(self.name, self.token, self._ttl_ms, not self._ended(), self.term,
                             None, None, False, election=True)


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


class LockSetBase(Generic[L]):
    """Several locks taken at once and held together, as both clients' LockSet has them:
    `locks` in their canonical order, `lost` once one of them is lost (then `_lost_now` lets
    go of the others and `on_lost` is called with the set, from the client's reader)."""

    def __init__(self, locks: List[L]) -> None:
        self.locks = locks
        self.lost: Optional[str] = None
        self.on_lost: Optional[Callable[[Any], Any]] = None
        for lock in locks:
            lock.on_lost = self._member_lost

    def __getitem__(self, resource: str) -> L:
        """The lock of `resource`."""
        return next(lock for lock in self.locks if lock.resource == resource)

    def check(self) -> None:
        """Raises LockLost if one of the locks was lost."""
        for lock in self.locks:
            lock.check()

    def _member_lost(self, lock: L) -> None:
        if self.lost:
            return
        self.lost = lock.lost
        self._lost_now()
        call_back(self.on_lost, self, "on_lost", self)

    def _lost_now(self) -> None:
        """Wakes what waits for the loss and lets go of the other locks, not from the reader."""
        raise NotImplementedError


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
        self.locks: List[L] = []  # an acquire of several resources: each one's lock
        self.observation: Optional[O] = None
        self.sent = time.monotonic()  # a validity in its reply counts from (before) then
        self.target: Optional[L] = None  # the lock a keeper's resume or give-back is for

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


def _nothing(*_: Any) -> None:
    pass


class Chores:
    """What a client's keeper does now (Session.chores): run `effects` (losses), write `lines`
    (requests started on the open connection, in order), connect again if `connect`; then wait
    until `wake_at` (time.monotonic(); None: until woken). `deadline` is when the next lock
    waiting for its resume runs out of validity (bounds a connect); `done`: nothing will ever
    be due again (the client is closed for good), the keeper may stop."""

    def __init__(self, effects: List[Effect], lines: List[bytes], connect: bool,
                 wake_at: Optional[float], deadline: Optional[float], done: bool) -> None:
        self.effects = effects
        self.lines = lines
        self.connect = connect
        self.wake_at = wake_at
        self.deadline = deadline
        self.done = done


class Session(Generic[L, O]):
    """A client's state: its connection's requests, locks and observations, and the locks it
    resumes after that connection ended. Not thread-safe: the blocking client serialises the
    calls."""

    def __init__(self, make_lock: Callable[[str, Json, bool], L],
                 make_leadership: Callable[[Json], L],
                 make_observation: Callable[[Json], O],
                 wake: Callable[[], None] = _nothing) -> None:
        """The factories make what an ok reply grants: a Lock (resource, reply, detached) for an
        acquire, a Leadership for a campaign, an Observation for an observe. `wake` (run as an
        effect) tells the client's keeper that chores() has new work."""
        self._make_lock = make_lock
        self._make_leadership = make_leadership
        self._make_observation = make_observation
        self._wake = wake
        self._ids = itertools.count(1)
        self._pending: Dict[int, Pending[L, O]] = {}
        self._locks: Dict[str, L] = {}  # token -> lock (detached leases are not here)
        self._observations: Dict[str, O] = {}  # election name -> observation
        self.closed: Optional[str] = None  # why, once the connection is gone
        self._unasked: Optional[str] = None  # an error line with no id (sent before a close)
        # Resuming: locks of an ended connection, not resumed yet (token -> lock; a lock that
        # ended meanwhile, released or lost, is resumed only to be given back), the tokens
        # whose resume is unanswered on this connection, and locks resumed after they ended.
        self._resuming: Dict[str, L] = {}
        self._resume_sent: Set[str] = set()
        self._giving_back: List[L] = []
        self._retry_at = 0.0  # the next connect or resume round, not before (monotonic)
        self._backoff = RETRY_FIRST_S
        self._held_id: Optional[int] = None  # the keeper's `held`, unanswered
        self._held_at: Optional[float] = None  # when the keeper last sent `held` (None: no
        # renewed lock was held at its last chores)

    def start(self, op: str, fields: Json,
              on_done: Callable[[Pending[L, O]], None]) -> Tuple[Pending[L, O], bytes]:
        """Registers a request; returns it and the line to send. `on_done(pending)` is the
        effect that comes with its reply. Raises LockError(disconnected) once closed, and for
        the release or extend of a lock waiting for its resume (it would reach the agent's
        next run before the resume: not_held)."""
        if self.closed is not None:
            raise LockError(Code.DISCONNECTED, self.closed)
        if op in ("release", "extend") and str(fields.get("token")) in self._resuming:
            raise LockError(Code.DISCONNECTED, "the lock on %r waits for its resume through the "
                            "agent's next run" % fields.get("resource"))
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

    def release_resuming(self, lock: L) -> bool:
        """Releases a lock that waits for its resume (False if it does not): marked released
        now, it is given back once resumed (or expires on the masters at its ttl)."""
        if self._resuming.get(lock.token) is not lock:
            return False
        if lock.depth > 1:  # a reentrant hold: one acquire less, still held
            lock.depth -= 1
            return True
        lock.released = True
        return True

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
        if pending.op == "resume":
            effects.extend(self._resumed(pending, message))
        elif pending.op == "held" and pending.id == self._held_id:
            self._held_id = None
        elif pending.op == "release" and pending.target is not None:  # a give-back, answered
            self.forget(pending.target)
        if message.get("ok"):
            # Registered before anyone sees the reply, so that an event right behind it (`lost`,
            # `leader`) finds what it is for.
            again = self._locks.get(str(message.get("token")))
            if pending.op == "acquire" and "resources" in message:
                # Several resources: a lock each, held on this connection like any other.
                for entry in message["resources"]:
                    member = self._make_lock(str(entry["resource"]), entry, False)
                    member._granted(pending.fields, pending.sent)
                    pending.locks.append(member)
                    self._locks[member.token] = member
                    if member._renew:
                        effects.append(self._wake)
            elif pending.op == "acquire" and again is not None and pending.fields.get("reentrant"):
                # A reentrant hold taken again: the same lock, one more acquire deep.
                again.depth = int(message.get("depth", again.depth + 1))
                again.validity_ms = int(message["validity_ms"])
                again._valid_until = pending.sent + again.validity_ms / 1000
                pending.lock = again
            elif pending.op in ("acquire", "campaign"):
                if pending.op == "campaign":
                    lock = self._make_leadership(message)
                else:
                    lock = self._make_lock(str(message["resource"]), message,
                                           bool(pending.fields.get("detach")))
                lock._granted(pending.fields, pending.sent)
                pending.lock = lock
                if not lock.detached:  # no `lost` comes for a detached lease, nor ends it here
                    self._locks[lock.token] = lock
                    if lock._renew:
                        effects.append(self._wake)  # its validity is read from now on
            elif pending.op == "extend":
                lock = self._locks.get(str(pending.fields.get("token")))
                if lock is not None and lock.resource == pending.fields.get("resource"):
                    lock.validity_ms = int(message["validity_ms"])
                    lock._valid_until = pending.sent + lock.validity_ms / 1000
                    lock._ttl_ms = pending.fields.get("ttl_ms")
            elif pending.op == "held":
                for entry in message.get("locks", []):
                    lock = self._locks.get(str(entry.get("token")))
                    if lock is not None:
                        lock._valid_until = pending.sent + int(entry["validity_ms"]) / 1000
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

    def _resumed(self, pending: Pending[L, O], reply: Json) -> List[Effect]:
        """The answer to a keeper's resume."""
        lock = pending.target
        assert lock is not None
        self._resume_sent.discard(lock.token)
        if reply.get("ok"):
            self._resuming.pop(lock.token, None)
            lock.validity_ms = int(reply["validity_ms"])
            lock._valid_until = pending.sent + lock.validity_ms / 1000
            self._locks[lock.token] = lock  # held on this connection now
            self._backoff = RETRY_FIRST_S
            if lock._ended():  # released, or reported lost, while it waited: give it back
                self._giving_back.append(lock)
                return [self._wake]
            _log.info("resumed the lock on %r (validity %d ms)", lock.resource, lock.validity_ms)
            return [self._wake] if lock._renew else []
        code = str(reply.get("error", Code.INTERNAL))
        if code in RESUME_REFUSED:
            self._resuming.pop(lock.token, None)
            if not lock._ended():
                _log.info("the lock on %r is lost: the agent did not resume it: %s: %s",
                          lock.resource, code, reply.get("message", ""))
            return [partial(lock._mark_lost, AGENT_LOST)]
        now = time.monotonic()  # no_quorum, shutting_down, too_many, ...: another round
        if self._retry_at <= now:
            self._retry_at = now + self._backoff
            self._backoff = min(self._backoff * 2, RETRY_MAX_S)
        return [self._wake]

    def end(self, reason: str, resume: bool = False) -> List[Effect]:
        """The connection is gone: every request waiting is answered disconnected, every
        observation ends, and every lock is lost (disconnected); but with `resume` (it ended
        unexpectedly) the locks and leaderships wait for their resume on a new
        connection (see chores()). Without `resume` (the client is closed), the locks still
        waiting for one are lost (disconnected) too."""
        effects: List[Effect] = []
        now = time.monotonic()
        if self.closed is None:
            self.closed = self._unasked or reason
            pending, self._pending = self._pending, {}
            locks, self._locks = self._locks, {}
            observations, self._observations = self._observations, {}
            self._resume_sent.clear()
            self._giving_back.clear()  # still among the locks: given back after a resume
            self._held_id = None
            was_resuming = bool(self._resuming)
            for request in pending.values():
                request.reply = disconnected_reply(self.closed)
                effects.append(partial(request.on_done, request))
            for lock in locks.values():
                if resume:
                    self._resuming[lock.token] = lock
                else:
                    effects.append(partial(lock._mark_lost, Code.DISCONNECTED))
            for observation in observations.values():
                effects.append(partial(observation._end, "disconnected"))
            if self._resuming:
                if was_resuming:  # a new connection ended before its resumes: back off
                    self.connect_failed(now)
                else:
                    self._retry_at = now
                    self._backoff = RETRY_FIRST_S
                    _log.info("the connection to the agent ended (%s): resuming %d lock(s)",
                              self.closed, len(self._resuming))
                effects.append(self._wake)
        if resume:
            effects.extend(self._expire(now))
        else:
            resuming, self._resuming = self._resuming, {}
            for lock in resuming.values():
                effects.append(partial(lock._mark_lost, Code.DISCONNECTED))
        return effects

    def reopen(self, now: float) -> None:
        """A new connection to the agent (after end(resume=True)): requests can be sent again,
        and the locks waiting for their resume are resumed at once."""
        self.closed = None
        self._unasked = None
        self._retry_at = now

    def connect_failed(self, now: float) -> None:
        """A connect (or a new connection) failed: the next one after a backoff."""
        self._retry_at = now + self._backoff
        self._backoff = min(self._backoff * 2, RETRY_MAX_S)

    def _expire(self, now: float) -> List[Effect]:
        """The locks whose validity ran out before their resume succeeded: lost (agent_lost);
        a resume answered ok later gives them back."""
        effects: List[Effect] = []
        for token, lock in list(self._resuming.items()):
            if now >= lock._valid_until:
                del self._resuming[token]
                if not lock._ended():
                    _log.info("the lock on %r is lost: its validity ran out before the agent "
                              "resumed it", lock.resource)
                effects.append(partial(lock._mark_lost, AGENT_LOST))
        return effects

    def chores(self, now: float) -> Chores:
        """What the keeper does now (see Chores): the requests it must send are started."""
        effects = self._expire(now)
        deadline = min((lock._valid_until for lock in self._resuming.values()), default=None)
        due: List[float] = [] if deadline is None else [deadline]
        lines: List[bytes] = []
        if self.closed is not None:
            if not self._resuming:
                return Chores(effects, [], False, None, None, True)
            if now >= self._retry_at:
                return Chores(effects, [], True, now, deadline, False)
            return Chores(effects, [], False, min(due + [self._retry_at]), deadline, False)
        unsent = [lock for token, lock in self._resuming.items()
                  if token not in self._resume_sent]
        if unsent and now < self._retry_at:
            due.append(self._retry_at)
        elif unsent:
            for lock in unsent:
                pending, line = self.start("resume", lock._resume_fields(), _nothing)
                pending.target = lock
                self._resume_sent.add(lock.token)
                lines.append(line)
        giving_back, self._giving_back = self._giving_back, []
        for lock in giving_back:
            if self._locks.get(lock.token) is lock:
                pending, line = self.start("release", {"resource": lock.resource,
                                                       "token": lock.token}, _nothing)
                pending.target = lock
                lines.append(line)
        renewed = [lock for lock in self._locks.values() if lock._renew and not lock._ended()]
        if not renewed:
            self._held_at = None
        else:
            # The agent renews at a third of the ttl: read the validity as often.
            every = max(HELD_MIN_S, min(lock._ttl_ms if lock._ttl_ms is not None
                                        else lock.validity_ms for lock in renewed) / 3000)
            if self._held_at is None:
                self._held_at = now  # the first renewed lock: its grant is that fresh
            if self._held_id is None and now >= self._held_at + every:
                pending, line = self.start("held", {}, _nothing)
                self._held_id = pending.id
                self._held_at = now
                lines.append(line)
            # While one is unanswered, look again in `every` (never sooner).
            due.append(self._held_at + every if self._held_id is None else now + every)
        return Chores(effects, lines, False, min(due, default=None), deadline, False)
