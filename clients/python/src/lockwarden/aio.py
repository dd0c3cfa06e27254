"""The asyncio client: every operation is a coroutine, on one connection read by one task.

    import lockwarden.aio

    async with lockwarden.aio.connect() as client:
        async with client.lock("db/migrations", ttl_ms=30000, wait_ms=5000, renew=True):
            await migrate()  # cancelled if the lock is lost; the block then raises LockLost

`connect()` is awaited for a Client (`client = await lockwarden.aio.connect()`, then
`await client.close()`) or used in `async with`, which closes it at the end. One Client is one
connection, that is one agent session: its locks are released when it closes. A reader task
hands each reply to the request with the same id, marks a Lock lost when the agent pushes a
`lost` event for it, and queues the `leader` events of an Observation. Use a Client from the
event loop it was connected in.

A lost lock, in a block. The task that entered `async with client.lock(...)` (or `async with
lock` on a lock from `acquire` or `campaign`) is cancelled (Task.cancel) when the reader learns
that the lock was lost: the agent's `lost` event, or the connection's end. The CancelledError
arrives at the await the block is suspended in, so `finally` clauses run as for any
cancellation. Leaving the block then raises LockLost (`lock.lost` says why, the CancelledError
is its __context__) in place of that CancelledError. So:

- a block cut short by the loss raises LockLost, not CancelledError; so does a block that
  caught the CancelledError and ended normally, and a lock lost before its block began raises
  LockLost on entering (the block does not run);
- a cancellation from elsewhere (task.cancel(), a TaskGroup, asyncio.timeout, wait_for)
  propagates as CancelledError, even if the lock was lost as well: on Python 3.11+ the task's
  cancellation requests are counted (Task.cancelling/uncancel, as asyncio.timeout does), and
  the block raises LockLost only when the loss's is the only one. Before 3.11 asyncio does not
  count them, so a cancellation from elsewhere propagates as CancelledError unless the loss
  also cancelled the block: once it did, a CancelledError leaving the block is LockLost;
- an exception the block raised itself propagates unchanged (the lock is released first);
- a lock used without a block cancels nothing: watch `lost`, `await lock.wait_lost()`,
  `on_lost`, or `lock.check()`.

A request whose awaiting task is cancelled is still answered: a lock, leadership or
observation granted after its caller stopped waiting is given back (released, resigned,
unobserved) by the client.

When the connection ends unexpectedly (the agent stopped or died) while the client holds locks,
a keeper task connects again and resumes them through the agent's next run (see
lockwarden._session); it also reads `held` while renewed locks are held, to know how long each
stays valid. A lock it cannot resume is lost (agent_lost), and so cancels its block.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from functools import partial
from types import TracebackType
from typing import Any, Callable, Coroutine, Generator, List, Optional, Sequence, Set, Type

from ._protocol import (Code, Json, Leader, LeaderEvent, LockError, LockLost, acquire_all_fields,
                        acquire_fields, campaign_fields, checked, decode, default_socket, leader_of, locks_of,
                        name_fields, token_fields, unreachable, validity_of)
from ._session import (Chores, LeadershipBase, LockBase, LockSetBase, ObservationBase, Pending,
                       Session)

__all__ = ["connect", "Client", "Lock", "LockSet", "Leadership", "Observation"]

_log = logging.getLogger("lockwarden")
_LINE_LIMIT = 1 << 26  # the longest line read (a `locks` reply of a busy agent is long)


class Lock(LockBase["Client"]):
    """A granted lock (see LockBase and Hold), released by `await lock.release()` or at the end
    of `async with lock:` (see the module's doc for what a loss does to the block). `on_lost`
    runs in the reader (or keeper) task; `await wait_lost()` returns at the loss."""

    on_lost: Optional[Callable[[Lock], Any]]

    def __init__(self, client: Client, resource: str, reply: Json, detached: bool = False) -> None:
        super().__init__(client, resource, reply, detached)
        self._lost_event = asyncio.Event()
        self._task: Optional[asyncio.Task[Any]] = None  # running the block: cancelled on a loss
        self._nested = 0  # blocks of a reentrant hold inside the outermost one
        self._cancelling = 0  # the task's cancellation requests when the block began (3.11+)
        self._cancelled = False  # the loss cancelled the task

    async def extend(self, ttl_ms: Optional[int] = None) -> int:
        """As lockwarden.Lock.extend: returns the new validity_ms."""
        self.check()
        self.validity_ms = await self.client.extend(self.resource, self.token, ttl_ms)
        return self.validity_ms

    async def release(self) -> None:
        """As lockwarden.Lock.release: no-op once released or lost (and a lock waiting for its
        resume is released at once, given back once resumed)."""
        if self.released or self.lost or self.client._session.release_resuming(self):
            return
        try:
            left = await self._give_back()
        except LockError as e:
            # The connection ended under the release: the lock now waits for its resume.
            if e.code == Code.DISCONNECTED and self.client._session.release_resuming(self):
                return
            raise
        if left:  # a reentrant hold, still `left` acquires deep
            self.depth = left
            return
        self.released = True
        self.client._session.forget(self)

    async def _give_back(self) -> int:
        return await self.client.release(self.resource, self.token)

    async def wait_lost(self, timeout: Optional[float] = None) -> Optional[str]:
        """Waits until the lock is lost or `timeout` seconds pass; returns `lost`."""
        try:
            await asyncio.wait_for(self._lost_event.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        return self.lost

    def _lost_now(self) -> None:
        self._lost_event.set()
        task = self._task
        if task is not None and not task.done():
            self._cancelled = True
            task.cancel()

    async def __aenter__(self) -> Lock:
        if self._task is not None and self._task is asyncio.current_task() and self.depth > 1:
            self._nested += 1  # a reentrant acquire's block inside the first one
            return self
        if self._task is not None:
            raise RuntimeError("%r is already in an `async with` block" % self)
        self.check()  # lost before the block began: the block does not run
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        if sys.version_info >= (3, 11):
            self._cancelling = task.cancelling()
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if self._nested > 0:  # an inner block of a reentrant hold: one release, still held
            self._nested -= 1
            try:
                await self.release()
            except LockError as e:
                self._release_failed(e, exc_type is not None)
            return
        task, self._task = self._task, None  # from here on a loss cancels nothing
        loss_only = False  # the loss's cancellation is the only one this block saw
        if self._cancelled and task is not None:
            self._cancelled = False
            if sys.version_info >= (3, 11):
                loss_only = task.uncancel() <= self._cancelling
            else:  # not counted: taken to be the loss's
                loss_only = isinstance(exc, asyncio.CancelledError)
        try:
            await self.release()
        except LockError as e:
            self._release_failed(e, exc_type is not None)
        if loss_only and isinstance(exc, asyncio.CancelledError):
            raise LockLost(self)  # its __context__ is the CancelledError
        self._block_ended(exc_type is not None)  # a cancellation from elsewhere propagates


class LockSet(LockSetBase[Lock]):
    """Several locks taken at once (Client.acquire_all), held together, as lockwarden.LockSet:
    `locks` in their canonical order, `lost` once one of them is lost (the others are then
    released, and `on_lost` is called with the set). `async with` releases them all at the end,
    and a block that ends after a loss raises LockLost; unlike a Lock's, the loss does not
    cancel the block: check `lost`, or await `wait_lost()`."""

    def __init__(self, locks: List[Lock]) -> None:
        self._lost_event = asyncio.Event()
        self._releasing: Optional[asyncio.Future[None]] = None
        super().__init__(locks)

    def _lost_now(self) -> None:
        self._lost_event.set()
        self._releasing = asyncio.ensure_future(self._release_quietly())

    async def _release_quietly(self) -> None:
        for lock in self.locks:
            with contextlib.suppress(LockError):
                await lock.release()

    async def release(self) -> None:
        """Releases every lock of the set; raises the first error after trying them all."""
        first: Optional[LockError] = None
        for lock in self.locks:
            try:
                await lock.release()
            except LockError as e:
                first = first or e
        if first is not None:
            raise first

    async def wait_lost(self, timeout: Optional[float] = None) -> Optional[str]:
        """Waits until one of the locks is lost or `timeout` seconds pass; returns `lost`."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._lost_event.wait(), timeout)
        return self.lost

    async def __aenter__(self) -> LockSet:
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        lost = next((lock for lock in self.locks if lock.lost), None)
        try:
            await self.release()
        except LockError:
            if exc_type is None and lost is None:
                raise
        if exc_type is None and lost is not None:
            raise LockLost(lost)


class Leadership(LeadershipBase["Client"], Lock):
    """A won campaign (see LeadershipBase). In `async with` it is lost like a Lock (the task is
    cancelled, the block raises LockLost); leaving the block resigns."""

    async def resign(self) -> None:
        """Stops leading now. No-op if already resigned or lost."""
        await self.release()

    async def _give_back(self) -> int:
        await self.client.resign(self.name, self.token)
        return 0


class Observation(ObservationBase["Client"]):
    """Follows who leads an election (Client.observe; see ObservationBase). An async iterator
    of the pushed LeaderEvents, in term order:

        async for event in observation:   # ends after unobserve (or observing the name again)
            ...                           # raises LockError(disconnected) if the connection ends

    `on_leader` runs in the reader task."""

    def __init__(self, client: Client, reply: Json) -> None:
        super().__init__(client, reply)
        self._guard = contextlib.nullcontext()  # one task changes it: the reader
        self._changed = asyncio.Event()

    def __aiter__(self) -> Observation:
        return self

    async def __anext__(self) -> LeaderEvent:
        await self._until_ready()
        event = self._take_iterated()
        if event is None:
            raise StopAsyncIteration
        return event

    async def next_event(self, timeout: Optional[float] = None) -> Optional[LeaderEvent]:
        """As lockwarden.Observation.next_event: None if no event came in `timeout` seconds."""
        if not self._ready():
            try:
                await asyncio.wait_for(self._until_ready(), timeout)
            except asyncio.TimeoutError:
                pass
        return self._take()

    async def unobserve(self) -> None:
        """Stops the events (Client.unobserve)."""
        await self.client.unobserve(self.name)

    async def _until_ready(self) -> None:
        while not self._ready():
            self._changed.clear()
            await self._changed.wait()

    def _wake(self) -> None:
        self._changed.set()


def _task_owner() -> int:
    """The asking task, as an acquire's owner (docs/protocol.md#owners-and-reentrancy)."""
    task = asyncio.current_task()
    return id(task) if task is not None else 0


class _LockBlock:
    """What Client.lock returns: acquires on entering `async with`, releases on leaving."""

    def __init__(self, client: Client, fields: Json) -> None:
        self._client = client
        self._fields = fields
        self._lock: Optional[Lock] = None

    async def __aenter__(self) -> Lock:
        self._lock = await self._client._acquire(self._fields)
        return await self._lock.__aenter__()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        assert self._lock is not None
        await self._lock.__aexit__(exc_type, exc, tb)


class Client:
    """A connection (session) to the agent; made by connect(). Closing it releases every
    lock it holds (but detached leases), and they are marked lost (disconnected). If the
    connection ends while it holds locks, it connects again and resumes them (see the
    module's doc)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 path: str) -> None:
        self.path = path
        self._writer = writer  # the current connection's
        self._session: Session[Lock, Observation] = Session(
            partial(Lock, self), partial(Leadership, self), partial(Observation, self),
            wake=self._wake_keeper)
        self._drain_lock = asyncio.Lock()  # one drain() at a time (Python < 3.10 needs it)
        self._chores: Set[asyncio.Task[None]] = set()  # giving back unwanted grants
        self._closing = False  # close() was called: no more connections
        self._keeper: Optional[asyncio.Task[None]] = None  # started when it has work
        self._woken = asyncio.Event()  # the keeper has work it has not looked at yet
        self._reading = asyncio.ensure_future(self._read_loop(reader, writer))

    async def request(self, op: str, **fields: Any) -> Json:
        """As lockwarden.Client.request: the reply (a dict) to one request."""
        return (await self._call(op, fields)).answer()

    async def acquire(self, resource: str, ttl_ms: Optional[int] = None, wait_ms: int = 0,
                      renew: bool = False, fence: bool = False, permits: Optional[int] = None,
                      shared: bool = False, detach: bool = False,
                      reentrant: bool = False) -> Lock:
        """Takes the lock, as lockwarden.Client.acquire (same arguments, same errors); the
        owner is the asking task (would_deadlock, reentrant: of that task)."""
        return await self._acquire(
            acquire_fields(resource, ttl_ms, wait_ms, renew, fence, permits, shared, detach,
                           owner=_task_owner(), reentrant=reentrant))

    def lock(self, resource: str, ttl_ms: Optional[int] = None, wait_ms: int = 0,
             renew: bool = False, fence: bool = False, permits: Optional[int] = None,
             shared: bool = False, detach: bool = False, reentrant: bool = False) -> _LockBlock:
        """For `async with client.lock(...) as lock:`: acquires (as acquire) on entering,
        releases on leaving; a loss cancels the block (see the module's doc). With reentrant,
        a block inside a block of the same lock and task takes it again."""
        return _LockBlock(
            self, acquire_fields(resource, ttl_ms, wait_ms, renew, fence, permits, shared, detach,
                                 owner=_task_owner(), reentrant=reentrant))

    async def acquire_all(self, resources: Sequence[str], ttl_ms: Optional[int] = None,
                          wait_ms: int = 0, renew: bool = False, fence: bool = False,
                          permits: Optional[int] = None, shared: bool = False) -> LockSet:
        """Takes every one of `resources`, all or none, as lockwarden.Client.acquire_all."""
        fields = acquire_all_fields(resources, acquire_fields(
            "", ttl_ms, wait_ms, renew, fence, permits, shared, False, owner=_task_owner()))
        return LockSet((await self._call("acquire", fields)).locks)

    async def release(self, resource: str, token: str) -> int:
        """As lockwarden.Client.release (also a detached lease, from any connection): how many
        acquires a reentrant hold still stands for (0: released)."""
        reply = (await self._call("release", token_fields(resource, token))).answer()
        return int(reply.get("depth", 0))

    async def extend(self, resource: str, token: str, ttl_ms: Optional[int] = None) -> int:
        """As lockwarden.Client.extend: returns the new validity_ms."""
        reply = (await self._call("extend", token_fields(resource, token, ttl_ms))).answer()
        return validity_of(reply)

    async def campaign(self, name: str, value: str, ttl_ms: Optional[int] = None,
                       wait_ms: Optional[int] = None) -> Leadership:
        """As lockwarden.Client.campaign: waits to lead `name`; `async with await
        client.campaign(...)` resigns at the end."""
        fields = campaign_fields(name, value, ttl_ms, wait_ms)
        return (await self._call("campaign", fields)).granted(Leadership)

    async def resign(self, name: str, token: str) -> None:
        """As lockwarden.Client.resign."""
        await self._call("resign", name_fields(name, token))

    async def leader(self, name: str) -> Optional[Leader]:
        """As lockwarden.Client.leader: who leads `name`, None: nobody."""
        return leader_of((await self._call("leader", name_fields(name))).answer())

    async def observe(self, name: str) -> Observation:
        """As lockwarden.Client.observe: an Observation of election `name`."""
        return (await self._call("observe", name_fields(name))).observing()

    async def unobserve(self, name: str) -> None:
        """As lockwarden.Client.unobserve."""
        await self._call("unobserve", name_fields(name))

    async def ping(self) -> None:
        await self._call("ping", {})

    async def held(self) -> List[Json]:
        """As lockwarden.Client.held."""
        return locks_of(await self.request("held"))

    async def health(self) -> Json:
        """As lockwarden.Client.health."""
        return await self.request("health")

    async def close(self) -> None:
        """Closes the connection and waits for the reader to finish: the agent releases every
        lock this client still holds, and they are marked lost (disconnected), as are the
        locks waiting for their resume."""
        self._closing = True
        keeper = self._keeper
        if keeper is not None:
            keeper.cancel()
            await asyncio.wait([keeper])
        writer = self._writer  # the last connection: the keeper connects no more
        writer.close()
        await asyncio.wait([self._reading])  # not `await`: a cancelled close leaves it running
        for effect in self._session.end("the client was closed"):
            effect()
        try:
            await writer.wait_closed()
        except OSError:
            pass

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.close()

    async def _acquire(self, fields: Json) -> Lock:
        return (await self._call("acquire", fields)).granted(Lock)

    async def _call(self, op: str, fields: Json) -> Pending[Lock, Observation]:
        """Sends a request and waits for its reply; raises LockError unless it is ok."""
        answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        pending, line = self._session.start(op, fields, partial(self._answered, answered))
        writer = self._writer
        writer.write(line)  # whole, before any await: lines never interleave
        try:
            await self._drain(writer)
            await answered
        except asyncio.CancelledError:
            if answered.done() and not answered.cancelled():
                # Answered, but cancelled before this task ran again: nobody else gives it back.
                self._give_back(pending)
            else:
                answered.cancel()  # _answered gives back what the reply grants
            raise
        checked(pending.answer())
        return pending

    def _answered(self, answered: asyncio.Future[None],
                  pending: Pending[Lock, Observation]) -> None:
        if answered.done():  # its caller stopped waiting (cancelled)
            self._give_back(pending)
        else:
            answered.set_result(None)

    def _give_back(self, pending: Pending[Lock, Observation]) -> None:
        """Gives back what the reply of a request nobody awaits granted."""
        if pending.lock is not None:
            self._chore(pending.lock.release())
        if pending.observation is not None:
            self._chore(self.unobserve(pending.observation.name))

    def _chore(self, work: Coroutine[Any, Any, None]) -> None:
        async def quietly() -> None:
            try:
                await work
            except LockError:
                pass  # gone already, or the connection is: nothing is left to give back

        task = asyncio.ensure_future(quietly())
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)

    async def _drain(self, writer: asyncio.StreamWriter) -> None:
        async with self._drain_lock:
            try:
                await writer.drain()
            except ConnectionError:
                pass  # the reader sees the end and answers every pending request

    async def _read_loop(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        reason = "connection closed by the agent"
        resume = True  # the connection ended (not a line the client cannot read)
        try:
            while True:
                line = await reader.readline()
                if not line.endswith(b"\n"):
                    break  # the end of the connection (after a line it cut short)
                for effect in self._session.receive(decode(line)):
                    effect()
        except OSError as e:
            reason = str(e) or type(e).__name__
        except ValueError as e:
            reason = str(e) or type(e).__name__
            resume = False
        except asyncio.CancelledError:
            reason = "the client's reader task was cancelled"
            resume = False
            raise
        except Exception as e:  # a line the client cannot read: give up the connection
            reason = "unreadable line from the agent: %r" % e
            resume = False
            _log.exception("lockwarden reader")
        finally:
            writer.close()
            for effect in self._session.end(reason, resume=resume and not self._closing):
                effect()

    def _wake_keeper(self) -> None:
        """The session has new work for the keeper: starts it if it is not running."""
        if self._closing:
            return
        self._woken.set()
        if self._keeper is None:
            self._keeper = asyncio.ensure_future(self._keep())

    async def _keep(self) -> None:
        """The keeper task: does the session's chores (reads `held`, connects again and
        resumes, reports what ran out of validity) until the client is closed for good."""
        try:
            while not self._closing:
                self._woken.clear()
                chores = self._session.chores(time.monotonic())
                for effect in chores.effects:
                    effect()
                if chores.done:
                    return
                if chores.lines:
                    writer = self._writer
                    writer.write(b"".join(chores.lines))
                    await self._drain(writer)
                if chores.connect:
                    await self._reconnect(chores)
                elif not self._woken.is_set():
                    timeout = (None if chores.wake_at is None
                               else max(0.0, chores.wake_at - time.monotonic()))
                    try:
                        await asyncio.wait_for(self._woken.wait(), timeout)
                    except asyncio.TimeoutError:
                        pass
        finally:
            self._keeper = None

    async def _reconnect(self, chores: Chores) -> None:
        """One connect to the agent's next run; the session then resumes its locks on it."""
        now = time.monotonic()
        # Bounded: the keeper reports the locks whose validity runs out meanwhile.
        timeout = 1.0 if chores.deadline is None else min(1.0, max(0.05, chores.deadline - now))
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(self.path, limit=_LINE_LIMIT), timeout)
        except (OSError, asyncio.TimeoutError):
            self._session.connect_failed(time.monotonic())
            return
        if self._closing:
            writer.close()
            return
        self._writer = writer
        self._session.reopen(time.monotonic())
        self._reading = asyncio.ensure_future(self._read_loop(reader, writer))


class _Connecting:
    """What connect() returns: awaited, the Client; in `async with`, the Client, closed at the
    end of the block."""

    def __init__(self, path: Optional[str]) -> None:
        self._path = path or default_socket()
        self._client: Optional[Client] = None

    def __await__(self) -> Generator[Any, None, Client]:
        return self._open().__await__()

    async def __aenter__(self) -> Client:
        self._client = await self._open()
        return self._client

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        assert self._client is not None
        await self._client.close()

    async def _open(self) -> Client:
        try:
            reader, writer = await asyncio.open_unix_connection(self._path, limit=_LINE_LIMIT)
        except OSError as e:
            raise unreachable(self._path, e) from e
        return Client(reader, writer, self._path)


def connect(path: Optional[str] = None) -> _Connecting:
    """Connects to the agent at `path` (default: $LOCKWARDEN_SOCKET, else
    /run/lockwarden/lockwarden.sock): `client = await connect()`, or `async with connect() as
    client:`. Raises OSError if it cannot connect (its message and `filename` name the
    socket)."""
    return _Connecting(path)
