"""The blocking client: lockwarden.Client, and the Lock, Leadership and Observation it returns.

One Client is one connection, that is one agent session: its locks are released when it closes.
A background thread reads the socket continuously, hands each reply to the request with the
same id, marks a Lock lost when the agent pushes a `lost` event for it, and queues the `leader`
events of an Observation. A Client may be shared by threads.

When the connection ends unexpectedly (the agent stopped or died) while the client holds locks,
a second thread, the keeper, connects again and resumes them through the agent's next run (see
lockwarden._session). The keeper also reads `held` while renewed locks are held, to know how
long each stays valid. Each connection has its own reader thread.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from functools import partial
from types import TracebackType
from typing import Any, Callable, Iterator, List, Optional, Sequence, Type

from ._protocol import (Code, Json, Leader, LeaderEvent, LockError, LockLost, acquire_all_fields,
                        acquire_fields, campaign_fields, checked, decode, default_socket, leader_of, locks_of,
                        name_fields, token_fields, unreachable, validity_of)
from ._session import (Chores, Effect, LeadershipBase, LockBase, LockSetBase, ObservationBase,
                       Pending, Session)

_log = logging.getLogger("lockwarden")


class Lock(LockBase["Client"]):
    """A granted lock (see LockBase and Hold). Use it as a context manager to release it at the
    end of the block: if the lock was lost meanwhile and the block raised nothing, leaving it
    raises LockLost, so a loss is never silent. `on_lost` runs in the client's reader (or
    keeper) thread; `wait_lost` blocks until the loss."""

    on_lost: Optional[Callable[[Lock], Any]]

    def __init__(self, client: Client, resource: str, reply: Json, detached: bool = False) -> None:
        super().__init__(client, resource, reply, detached)
        self._lost_event = threading.Event()

    def extend(self, ttl_ms: Optional[int] = None) -> int:
        """Resets the lock's ttl to ttl_ms (default: the agent's) from now; returns the new
        validity_ms. Raises LockLost if the lock was lost, LockError not_held if it just was,
        LockError disconnected while it waits for its resume (the agent restarting)."""
        self.check()
        self.validity_ms = self.client.extend(self.resource, self.token, ttl_ms)
        return self.validity_ms

    def release(self) -> None:
        """Gives the lock back. No-op if it was already released or lost; LockError not_held
        if the agent found it gone (lost, its event still on the way). A lock waiting for its
        resume (the agent restarting) is released at once here, and given back to the agent
        once the client has resumed it."""
        if self.released or self.lost or self.client._release_resuming(self):
            return
        try:
            left = self._give_back()
        except LockError as e:
            # The connection ended under the release: the lock now waits for its resume.
            if e.code == Code.DISCONNECTED and self.client._release_resuming(self):
                return
            raise
        if left:  # a reentrant hold, still `left` acquires deep
            self.depth = left
            return
        self.released = True
        self.client._forget(self)

    def _give_back(self) -> int:
        return self.client.release(self.resource, self.token)

    def wait_lost(self, timeout: Optional[float] = None) -> Optional[str]:
        """Blocks until the lock is lost or `timeout` seconds pass; returns `lost`."""
        self._lost_event.wait(timeout)
        return self.lost

    def _lost_now(self) -> None:
        self._lost_event.set()

    def __enter__(self) -> Lock:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        try:
            self.release()
        except LockError as e:
            self._release_failed(e, exc_type is not None)
        self._block_ended(exc_type is not None)


class LockSet(LockSetBase[Lock]):
    """Several locks taken at once (Client.acquire_all), held together: `locks` in their
    canonical order (sorted), one per resource, each a Lock with its own token and fence. When
    one is lost the set is lost (`lost` says why, `on_lost` is called with the set from the
    client's reader, the others are released); `release()` or the end of a `with` block releases
    them all, and a block that ends after a loss raises LockLost."""

    def __init__(self, locks: List[Lock]) -> None:
        self._lost_event = threading.Event()
        super().__init__(locks)

    def _lost_now(self) -> None:
        self._lost_event.set()
        # Not from the reader, which reads the releases' replies.
        threading.Thread(target=self._release_quietly, name="lockwarden-set", daemon=True).start()

    def _release_quietly(self) -> None:
        for lock in self.locks:
            try:
                lock.release()
            except LockError:
                pass  # lost too, or the connection ended: nothing is held either way

    def release(self) -> None:
        """Releases every lock of the set (those lost or released already are skipped); raises
        the first error after trying them all."""
        first: Optional[LockError] = None
        for lock in self.locks:
            try:
                lock.release()
            except LockError as e:
                first = first or e
        if first is not None:
            raise first

    def wait_lost(self, timeout: Optional[float] = None) -> Optional[str]:
        """Blocks until one of the locks is lost or `timeout` seconds pass; returns `lost`."""
        self._lost_event.wait(timeout)
        return self.lost

    def __enter__(self) -> LockSet:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        lost = next((lock for lock in self.locks if lock.lost), None)
        try:
            self.release()
        except LockError:
            if exc_type is None and lost is None:
                raise
        if exc_type is None and lost is not None:
            raise LockLost(lost)


class Leadership(LeadershipBase["Client"], Lock):
    """A won campaign (see LeadershipBase): `with client.campaign(...)` resigns at the end."""

    def resign(self) -> None:
        """Stops leading now. No-op if already resigned or lost."""
        self.release()

    def _give_back(self) -> int:
        self.client.resign(self.name, self.token)
        return 0


class Observation(ObservationBase["Client"]):
    """Follows who leads an election (Client.observe; see ObservationBase). `on_leader` runs in
    the client's reader thread."""

    _guard: threading.Condition

    def __init__(self, client: Client, reply: Json) -> None:
        super().__init__(client, reply)
        self._guard = threading.Condition()

    def next_event(self, timeout: Optional[float] = None) -> Optional[LeaderEvent]:
        """The next event not yet taken, waiting up to `timeout` seconds (None: for ever); None
        if none came. Once the observation ended and no event is left, raises LockError:
        not_held (unobserved, or observed again) or disconnected."""
        with self._guard:
            self._guard.wait_for(self._ready, timeout)
            return self._take()

    def __iter__(self) -> Iterator[LeaderEvent]:
        """The events, blocking for each, until the observation is unobserved (or observed
        again); raises LockError(disconnected) if the connection ends."""
        while True:
            with self._guard:
                self._guard.wait_for(self._ready)
                event = self._take_iterated()
            if event is None:
                return
            yield event

    def unobserve(self) -> None:
        """Stops the events (Client.unobserve)."""
        self.client.unobserve(self.name)

    def _wake(self) -> None:
        self._guard.notify_all()


def _run(effects: List[Effect]) -> None:
    for effect in effects:
        effect()


class Client:
    """A connection (session) to the agent at `path` (default: default_socket()). Closing it
    releases every lock it holds (but detached leases). Raises OSError if it cannot connect
    (its message and `filename` name the socket).
    If the connection ends while it holds locks, it connects again and resumes them (see the
    module's doc)."""

    def __init__(self, path: Optional[str] = None) -> None:
        self.path = path or default_socket()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(self.path)
        except OSError as e:
            self._sock.close()
            raise unreachable(self.path, e) from e
        # _mutex guards _session, and which connection is current (_sock, _reader), and the
        # keeper's state (_keeper, _woken, _closing); _wake is the keeper's condition on it.
        self._mutex = threading.Lock()
        self._wake = threading.Condition(self._mutex)
        self._write_mutex = threading.Lock()  # one request line at a time on the socket
        self._session: Session[Lock, Observation] = Session(
            partial(Lock, self), partial(Leadership, self), partial(Observation, self),
            wake=self._wake_keeper)
        self._closing = False  # close() was called: no more connections
        self._close_after_reading = False  # close() came from the current reader thread
        self._keeper: Optional[threading.Thread] = None  # started when it has work
        self._woken = False  # the keeper has work it has not looked at yet
        self._threads = threading.local()  # `own` in the client's reader and keeper threads
        self._reader = self._start_reader(self._sock)

    def request(self, op: str, **fields: Any) -> Json:
        """Sends one request and returns its reply (a dict); raises LockError if ok is false."""
        return self._call(op, fields).answer()

    def acquire(self, resource: str, ttl_ms: Optional[int] = None, wait_ms: int = 0,
                renew: bool = False, fence: bool = False, permits: Optional[int] = None,
                shared: bool = False, detach: bool = False, reentrant: bool = False) -> Lock:
        """Takes the lock, waiting up to wait_ms for other holders. renew=True: the agent
        extends it every ttl/3 while this connection is open. fence=True: `lock.fence` is a
        fencing token. permits=K takes one permit of a semaphore of K (at most K holders at
        once); shared=True a read hold (readers share, the exclusive hold excludes them);
        neither, the exclusive hold. detach=True takes a detached lease: it outlives this
        connection until its ttl runs out or release(resource, token) from any connection of
        this uid (not with renew). Raises LockError (timeout: held by others for all of
        wait_ms; no_quorum: masters unavailable; kind_mismatch: the resource is in use as
        another kind or another K; would_deadlock: this thread holds it already, so the acquire
        could only wait for itself; ...). reentrant=True: a mutex or write hold this thread
        holds already is taken again instead (the same Lock, `depth` one more), and as many
        releases (or `with` blocks ending) let go of it."""
        fields = acquire_fields(resource, ttl_ms, wait_ms, renew, fence, permits, shared, detach,
                                owner=threading.get_ident(), reentrant=reentrant)
        return self._call("acquire", fields).granted(Lock)

    lock = acquire  # reads well in `with client.lock(...) as lock:`

    def acquire_all(self, resources: Sequence[str], ttl_ms: Optional[int] = None,
                    wait_ms: int = 0, renew: bool = False, fence: bool = False,
                    permits: Optional[int] = None, shared: bool = False) -> LockSet:
        """Takes every one of `resources` (2 to 16, distinct), all or none, within one wait_ms:
        the agent takes them in one canonical order, so two such acquires never wait for each
        other in a cycle. Returns a LockSet (a lock each, held together); raises LockError as
        acquire does, naming the resource that could not be taken (none is held then)."""
        fields = acquire_all_fields(resources, acquire_fields(
            "", ttl_ms, wait_ms, renew, fence, permits, shared, False,
            owner=threading.get_ident()))
        return LockSet(self._call("acquire", fields).locks)

    lock_all = acquire_all  # reads well in `with client.lock_all([...]) as locks:`

    def release(self, resource: str, token: str) -> int:
        """Releases the hold of `token` on `resource`: this connection's, or a detached lease
        from any connection (LockError not_held: no such hold; forbidden: another uid's).
        Returns how many acquires a reentrant hold still stands for (0: released)."""
        return int(self._call("release", token_fields(resource, token)).answer().get("depth", 0))

    def extend(self, resource: str, token: str, ttl_ms: Optional[int] = None) -> int:
        """Resets the ttl of the hold of `token` (as release) to ttl_ms from now; returns the
        new validity_ms."""
        return validity_of(self._call("extend", token_fields(resource, token, ttl_ms)).answer())

    def campaign(self, name: str, value: str, ttl_ms: Optional[int] = None,
                 wait_ms: Optional[int] = None) -> Leadership:
        """Waits up to wait_ms (default: the agent's max_wait_ms) to lead election `name`,
        announcing `value` (e.g. host:port). Returns the Leadership, which lasts while this
        connection lives; raises LockError (timeout: another led for all of wait_ms;
        no_quorum, kind_mismatch, forbidden, ...)."""
        fields = campaign_fields(name, value, ttl_ms, wait_ms)
        return self._call("campaign", fields).granted(Leadership)

    def resign(self, name: str, token: str) -> None:
        """Stops leading `name` (LockError not_held: `token` does not lead it here now)."""
        self._call("resign", name_fields(name, token))

    def leader(self, name: str) -> Optional[Leader]:
        """Who leads `name` now, through any agent; None: nobody."""
        return leader_of(self._call("leader", name_fields(name)).answer())

    def observe(self, name: str) -> Observation:
        """Follows election `name`: an Observation holding the current leader, then receiving
        every change. Observing a name again starts it over (the older Observation ends)."""
        return self._call("observe", name_fields(name)).observing()

    def unobserve(self, name: str) -> None:
        """Stops the events of `name`; its Observation ends (LockError not_held: not
        observed)."""
        self._call("unobserve", name_fields(name))

    def ping(self) -> None:
        self._call("ping", {})

    def held(self) -> List[Json]:
        """The locks this connection holds (docs/protocol.md#held)."""
        return locks_of(self.request("held"))

    def health(self) -> Json:
        """The agent's view of the masters (docs/protocol.md#health)."""
        return self.request("health")

    def close(self) -> None:
        """Closes the connection; the agent releases every lock this client still holds, and
        they are marked lost (disconnected), as are the locks waiting for their resume.
        Detached leases stay."""
        with self._mutex:  # from here on the keeper installs no new connection
            self._closing = True
            self._wake.notify_all()
            keeper, sock, reader = self._keeper, self._sock, self._reader
        self._shut_down(sock)  # a writer blocked on it fails
        if threading.current_thread() is reader:  # e.g. close() from on_lost
            self._close_after_reading = True  # the reader cannot wait for itself
        else:
            reader.join()
            with self._write_mutex:
                sock.close()
        with self._mutex:
            effects = self._session.end("the client was closed")
        _run(effects)
        # The keeper stops at once now. Not waited for from the client's own threads (an
        # on_lost calling close()): the keeper may itself be in an on_lost, in close(), waiting
        # for that thread.
        if keeper is not None and not getattr(self._threads, "own", False):
            keeper.join()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()

    def _call(self, op: str, fields: Json) -> Pending[Lock, Observation]:
        """Sends a request and waits for its reply; raises LockError unless it is ok."""
        done = threading.Event()
        with self._mutex:
            pending, line = self._session.start(op, fields, lambda _: done.set())
            sock = self._sock
        try:
            with self._write_mutex:  # not _mutex: the reader must never wait for a writer
                sock.sendall(line)
        except OSError as e:
            with self._mutex:
                self._session.drop(pending)
            raise LockError(Code.DISCONNECTED, str(e)) from e
        done.wait()
        checked(pending.answer())
        return pending

    def _forget(self, lock: Lock) -> None:
        with self._mutex:
            self._session.forget(lock)

    def _release_resuming(self, lock: Lock) -> bool:
        with self._mutex:
            return self._session.release_resuming(lock)

    def _start_reader(self, sock: socket.socket) -> threading.Thread:
        reader = threading.Thread(target=self._read_loop, args=(sock,), name="lockwarden",
                                  daemon=True)
        reader.start()
        return reader

    def _read_loop(self, sock: socket.socket) -> None:
        self._threads.own = True
        reason = "connection closed by the agent"
        resume = True  # the connection ended (not a line the client cannot read)
        try:
            with sock.makefile("rb") as stream:
                for line in stream:
                    if not line.endswith(b"\n"):
                        break  # cut short by the end of the connection
                    message = decode(line)
                    with self._mutex:
                        effects = self._session.receive(message)
                    _run(effects)
        except OSError as e:
            reason = str(e)
        except ValueError as e:  # a line that is not a JSON object
            reason = str(e)
            resume = False
        except Exception as e:  # a reply the client cannot read
            reason = "unreadable line from the agent: %r" % e
            resume = False
            _log.exception("lockwarden reader")
        # Gives the connection up, so that the agent ends the session too: else it would hold
        # and renew the locks that are now marked lost.
        self._shut_down(sock)
        with self._mutex:
            effects = self._session.end(reason, resume=resume and not self._closing)
        _run(effects)
        if self._close_after_reading and threading.current_thread() is self._reader:
            sock.close()

    def _wake_keeper(self) -> None:
        """The session has new work for the keeper: starts it if it is not running."""
        with self._mutex:
            if self._closing:
                return
            self._woken = True
            if self._keeper is None:
                self._keeper = threading.Thread(target=self._keep, name="lockwarden-keeper",
                                                daemon=True)
                self._keeper.start()
            self._wake.notify_all()

    def _keep(self) -> None:
        """The keeper thread: does the session's chores (reads `held`, connects again and
        resumes, reports what ran out of validity) until the client is closed for good."""
        self._threads.own = True
        wake_at: Optional[float] = time.monotonic()
        while True:
            with self._mutex:
                while not (self._woken or self._closing):
                    now = time.monotonic()
                    if wake_at is not None and now >= wake_at:
                        break
                    self._wake.wait(None if wake_at is None else wake_at - now)
                self._woken = False
                if self._closing:
                    self._keeper = None
                    return
                chores = self._session.chores(time.monotonic())
                sock = self._sock
                if chores.done:
                    self._keeper = None
            _run(chores.effects)
            if chores.done:
                return
            if chores.lines:
                try:
                    with self._write_mutex:
                        sock.sendall(b"".join(chores.lines))
                except OSError:
                    self._shut_down(sock)  # its reader ends the session
            if chores.connect:
                self._reconnect(chores)
            wake_at = chores.wake_at

    def _reconnect(self, chores: Chores) -> None:
        """One connect to the agent's next run; the session then resumes its locks on it."""
        now = time.monotonic()
        # Bounded: the keeper reports the locks whose validity runs out meanwhile.
        timeout = 1.0 if chores.deadline is None else min(1.0, max(0.05, chores.deadline - now))
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(self.path)
            sock.settimeout(None)
        except OSError:
            sock.close()
            with self._mutex:
                self._session.connect_failed(time.monotonic())
            return
        with self._mutex:
            if self._closing:
                old = sock  # not used: close() takes the connection it finds
            else:
                old, self._sock = self._sock, sock
                self._session.reopen(time.monotonic())
                self._reader = self._start_reader(sock)
        with self._write_mutex:  # its reader is done with it, and no writer is on it now
            old.close()

    def _shut_down(self, sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
