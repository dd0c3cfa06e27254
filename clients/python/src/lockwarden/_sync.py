"""The blocking client: lockwarden.Client, and the Lock, Leadership and Observation it returns.

One Client is one connection, that is one agent session: its locks are released when it closes.
A background thread reads the socket continuously, hands each reply to the request with the
same id, marks a Lock lost when the agent pushes a `lost` event for it, and queues the `leader`
events of an Observation. A Client may be shared by threads.
"""

from __future__ import annotations

import logging
import socket
import threading
from functools import partial
from types import TracebackType
from typing import Any, Callable, Iterator, List, Optional, Type

from ._protocol import (Code, Json, Leader, LeaderEvent, LockError, acquire_fields,
                        campaign_fields, checked, decode, default_socket, leader_of, locks_of,
                        name_fields, token_fields, validity_of)
from ._session import Effect, LeadershipBase, LockBase, ObservationBase, Pending, Session

_log = logging.getLogger("lockwarden")


class Lock(LockBase["Client"]):
    """A granted lock (see LockBase and Hold). Use it as a context manager to release it at the
    end of the block: if the lock was lost meanwhile and the block raised nothing, leaving it
    raises LockLost, so a loss is never silent. `on_lost` runs in the client's reader thread;
    `wait_lost` blocks until the loss."""

    on_lost: Optional[Callable[[Lock], Any]]

    def __init__(self, client: Client, resource: str, reply: Json, detached: bool = False) -> None:
        super().__init__(client, resource, reply, detached)
        self._lost_event = threading.Event()

    def extend(self, ttl_ms: Optional[int] = None) -> int:
        """Resets the lock's ttl to ttl_ms (default: the agent's) from now; returns the new
        validity_ms. Raises LockLost if the lock was lost, LockError not_held if it just was."""
        self.check()
        self.validity_ms = self.client.extend(self.resource, self.token, ttl_ms)
        return self.validity_ms

    def release(self) -> None:
        """Gives the lock back. No-op if it was already released or lost; LockError not_held
        if the agent found it gone (lost, its event still on the way)."""
        if self.released or self.lost:
            return
        self._give_back()
        self.released = True
        self.client._forget(self)

    def _give_back(self) -> None:
        self.client.release(self.resource, self.token)

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


class Leadership(LeadershipBase["Client"], Lock):
    """A won campaign (see LeadershipBase): `with client.campaign(...)` resigns at the end."""

    def resign(self) -> None:
        """Stops leading now. No-op if already resigned or lost."""
        self.release()

    def _give_back(self) -> None:
        self.client.resign(self.name, self.token)


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
    """One connection (session) to the agent at `path` (default: default_socket()). Closing it
    releases every lock it holds (but detached leases). Raises OSError if it cannot connect."""

    def __init__(self, path: Optional[str] = None) -> None:
        self.path = path or default_socket()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(self.path)
        except OSError:
            self._sock.close()
            raise
        self._mutex = threading.Lock()  # guards _session
        self._write_mutex = threading.Lock()  # one request line at a time on the socket
        self._session: Session[Lock, Observation] = Session(
            partial(Lock, self), partial(Leadership, self), partial(Observation, self))
        self._close_after_reading = False  # close() came from the reader thread
        self._reader = threading.Thread(target=self._read_loop, name="lockwarden", daemon=True)
        self._reader.start()

    def request(self, op: str, **fields: Any) -> Json:
        """Sends one request and returns its reply (a dict); raises LockError if ok is false."""
        return self._call(op, fields).answer()

    def acquire(self, resource: str, ttl_ms: Optional[int] = None, wait_ms: int = 0,
                renew: bool = False, fence: bool = False, permits: Optional[int] = None,
                shared: bool = False, detach: bool = False) -> Lock:
        """Takes the lock, waiting up to wait_ms for other holders. renew=True: the agent
        extends it every ttl/3 while this connection is open. fence=True: `lock.fence` is a
        fencing token. permits=K takes one permit of a semaphore of K (at most K holders at
        once); shared=True a read hold (readers share, the exclusive hold excludes them);
        neither, the exclusive hold. detach=True takes a detached lease: it outlives this
        connection until its ttl runs out or release(resource, token) from any connection of
        this uid (not with renew). Raises LockError (timeout: held by others for all of
        wait_ms; no_quorum: masters unavailable; kind_mismatch: the resource is in use as
        another kind or another K; ...)."""
        fields = acquire_fields(resource, ttl_ms, wait_ms, renew, fence, permits, shared, detach)
        return self._call("acquire", fields).granted(Lock)

    lock = acquire  # reads well in `with client.lock(...) as lock:`

    def release(self, resource: str, token: str) -> None:
        """Releases the hold of `token` on `resource`: this connection's, or a detached lease
        from any connection (LockError not_held: no such hold; forbidden: another uid's)."""
        self._call("release", token_fields(resource, token))

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
        they are marked lost (disconnected). Detached leases stay."""
        self._shut_down()
        if threading.current_thread() is self._reader:  # e.g. close() from on_lost
            self._close_after_reading = True  # the reader cannot wait for itself
        else:
            self._reader.join()
            self._sock.close()

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
        try:
            with self._write_mutex:  # not _mutex: the reader must never wait for a writer
                self._sock.sendall(line)
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

    def _read_loop(self) -> None:
        reason = "connection closed by the agent"
        try:
            with self._sock.makefile("rb") as stream:
                for line in stream:
                    message = decode(line)
                    with self._mutex:
                        effects = self._session.receive(message)
                    _run(effects)
        except (OSError, ValueError) as e:  # ValueError: a line that is not a JSON object
            reason = str(e)
        except Exception as e:  # a reply the client cannot read
            reason = "unreadable line from the agent: %r" % e
            _log.exception("lockwarden reader")
        # Gives the connection up, so that the agent ends the session too: else it would hold
        # and renew the locks that are now marked lost.
        self._shut_down()
        with self._mutex:
            effects = self._session.end(reason)
        _run(effects)
        if self._close_after_reading:
            self._sock.close()

    def _shut_down(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
