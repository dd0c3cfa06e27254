"""Client for the lockwarden agent's Unix socket (docs/protocol.md). Python 3.7+, stdlib only.

    import lockwarden

    with lockwarden.Client() as client:
        with client.lock("db/migrations", ttl_ms=30000, wait_ms=5000, renew=True) as lock:
            migrate(stop_if=lambda: lock.lost)

One Client is one connection, that is one agent session: its locks are released when it closes.
A background thread reads the socket continuously, hands each reply to the request with the
same id, and marks a Lock as lost when the agent pushes a `lost` event for it. A Client may be
shared by threads.

Elections (docs/elections.md): `client.campaign(name, value)` waits to lead `name` and returns a
Leadership (a Lock whose release resigns), lost like a lock; `client.leader(name)` says who leads;
`client.observe(name)` returns an Observation that receives the pushed `leader` events.
Detached leases (acquire with detach=True) outlive the connection: `client.release(resource,
token)` and `client.extend(resource, token)` end or keep them from any connection.
"""

import itertools
import json
import os
import queue
import socket
import threading

DEFAULT_SOCKET = "/run/lockwarden/lockwarden.sock"

__all__ = ["Client", "Lock", "Leadership", "Observation", "LockError", "LockLost",
           "DEFAULT_SOCKET", "default_socket"]


def default_socket():
    """$LOCKWARDEN_SOCKET if set, else /run/lockwarden/lockwarden.sock."""
    return os.environ.get("LOCKWARDEN_SOCKET") or DEFAULT_SOCKET


class LockError(Exception):
    """An error reply of the agent. `code` is the machine code to branch on (timeout, no_quorum,
    not_held, too_many, forbidden, bad_request, kind_mismatch, shutting_down, internal), `message`
    is for people.
    The client adds two codes of its own: `disconnected` (the connection to the agent ended) and
    `lost` (raised as LockLost)."""

    def __init__(self, code, message):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message


class LockLost(LockError):
    """The lock ended without being released: stop the work it protected."""

    def __init__(self, lock):
        super().__init__("lost", "lock on %r was lost (%s)" % (lock.resource, lock.lost))
        self.lock = lock


class Lock:
    """A granted lock. Use it as a context manager to release it at the end of the block.

    `lost` is None while the lock is held, else the reason it ended without a release
    (renew_failed, expired, revoked, disconnected). `on_lost`, if set, is called with the lock
    from the client's reader thread when that happens.

    `mode` is "exclusive" (a mutex's hold, or the write hold), "shared" (a read hold) or "permit"
    (a semaphore's); `permit` is which permit (0..K-1) for a semaphore's, else None.

    A detached lease (`detached` True) outlives the connection: nothing pushes `lost` for it and
    closing the client does not mark it lost; it ends at its ttl or when released by its token."""

    def __init__(self, client, resource, reply, detached=False):
        self.client = client
        self.resource = resource
        self.token = reply["token"]
        self.validity_ms = reply["validity_ms"]
        self.waited_ms = reply.get("waited_ms", 0)
        self.fence = reply.get("fence")
        self.mode = reply.get("mode", "exclusive")
        self.permit = reply.get("permit")
        self.detached = detached
        self.lost = None
        self.released = False
        self.on_lost = None
        self._lost_event = threading.Event()

    def extend(self, ttl_ms=None):
        """Resets the lock's ttl to ttl_ms from now; returns the new validity_ms."""
        self.check()
        self.validity_ms = self.client.extend(self.resource, self.token, ttl_ms)
        return self.validity_ms

    def release(self):
        """Gives the lock back. No-op if it was already released or lost."""
        if self.released or self.lost:
            return
        self._give_back()
        self.released = True
        self.client._forget(self)

    def _give_back(self):
        self.client.release(self.resource, self.token)

    def check(self):
        """Raises LockLost if the lock was lost."""
        if self.lost:
            raise LockLost(self)

    def wait_lost(self, timeout=None):
        """Blocks until the lock is lost or `timeout` seconds pass; returns the reason or None."""
        self._lost_event.wait(timeout)
        return self.lost

    def _mark_lost(self, reason):
        if self.lost or self.released:
            return
        self.lost = reason
        self._lost_event.set()
        if self.on_lost:
            self.on_lost(self)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.release()
        except LockError as e:
            # not_held: lost, its event still on the way; disconnected: the agent released it.
            if e.code in ("not_held", "disconnected"):
                self._mark_lost(e.code)
            elif exc_type is None:
                raise
        if exc_type is None and self.lost:
            raise LockLost(self)  # the block finished, but not under the lock
        return False


class Leadership(Lock):
    """A won campaign: this client leads `name` (also `resource`) with `term` while its
    connection lives. Lost like a Lock (`lost`, `on_lost`, `wait_lost`, LockLost): stop acting as
    the leader at once. `release()` (and leaving a `with` block) resigns; `extend` works too."""

    def __init__(self, client, name, reply):
        super().__init__(client, name, reply)
        self.name = name
        self.term = reply["term"]

    def resign(self):
        """Stops leading now. No-op if already resigned or lost."""
        self.release()

    def _give_back(self):
        self.client.resign(self.name, self.token)


class Observation:
    """Follows who leads an election (Client.observe). `leader` is the latest leader (a dict:
    value, agent, host, pid, since, term) or None, `term` the latest term known (None until one
    is). Each pushed `leader` event (a dict: name, leader, term, missed) updates them, is queued
    for `next_event`, and is passed to `on_leader`, if set, from the client's reader thread.
    `missed` True: changes before this one may have gone unseen. `ended` is None while the
    observation runs, else why it stopped (unobserved, or the connection's end)."""

    def __init__(self, client, name, reply):
        self.client = client
        self.name = name
        self.leader = reply.get("leader")
        self.term = self.leader["term"] if self.leader else None
        self.on_leader = None
        self.ended = None
        self._events = queue.Queue()

    def next_event(self, timeout=None):
        """The next `leader` event not yet taken, waiting up to `timeout` seconds; None if none
        came. Raises LockError (disconnected; not_held once unobserved or observed again) when
        the observation ended and no event is left."""
        try:
            event = self._events.get(timeout=timeout)
        except queue.Empty:
            return None
        if event is None:
            self._events.put(None)  # every later call ends the same way
            raise LockError("disconnected" if self.ended == "disconnected" else "not_held",
                            "observation of %r ended (%s)" % (self.name, self.ended))
        return event

    def unobserve(self):
        """Stops the events (Client.unobserve)."""
        self.client.unobserve(self.name)

    def _push(self, event):
        self.leader = event.get("leader")
        self.term = event.get("term")
        self._events.put(event)
        if self.on_leader:
            self.on_leader(event)

    def _end(self, reason):
        if self.ended is None:
            self.ended = reason
            self._events.put(None)


class Client:
    """One connection (session) to the agent. Closing it releases every lock it holds."""

    def __init__(self, path=None):
        self.path = path or default_socket()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(self.path)
        except OSError:
            self._sock.close()
            raise
        self._ids = itertools.count(1)
        self._mutex = threading.Lock()  # guards _pending, _locks, _closed
        self._write_mutex = threading.Lock()  # one request line at a time on the socket
        self._pending = {}  # id -> _Pending
        self._locks = {}  # token -> Lock
        self._observations = {}  # election name -> Observation
        self._closed = None  # reason once the connection is gone
        self._unasked = None  # an error line with no id (sent before the agent closes)
        self._reader = threading.Thread(target=self._read_loop, name="lockwarden", daemon=True)
        self._reader.start()

    def request(self, op, **fields):
        """Sends one request and returns its reply (a dict); raises LockError if ok is false."""
        slot = _Pending(op, fields)
        with self._mutex:
            if self._closed:
                raise LockError("disconnected", self._closed)
            rid = next(self._ids)
            self._pending[rid] = slot
        line = json.dumps(dict(id=rid, op=op, **fields)) + "\n"
        try:
            with self._write_mutex:  # not _mutex: the reader must never wait for a writer
                self._sock.sendall(line.encode())
        except OSError as e:
            with self._mutex:
                self._pending.pop(rid, None)
            raise LockError("disconnected", str(e)) from e
        slot.done.wait()
        reply = slot.reply
        if not reply.get("ok"):
            raise LockError(reply.get("error", "internal"), reply.get("message", ""))
        return reply

    def acquire(self, resource, ttl_ms=None, wait_ms=0, renew=False, fence=False, permits=None,
                shared=False, detach=False):
        """Takes the lock, waiting up to wait_ms for another holder. With renew=True the agent
        extends it every ttl/3 while this connection is open. permits=K takes one permit of a
        semaphore of K (at most K holders at once); shared=True a read hold (readers share, an
        exclusive hold excludes them); neither, the exclusive hold. detach=True takes a detached
        lease: it outlives this connection until its ttl runs out or release(resource, token)
        from any connection of this uid (not with renew). Returns a Lock; raises
        LockError (code timeout: held by someone else for all of wait_ms; no_quorum: masters
        unavailable; kind_mismatch: the resource is in use as another kind or another K)."""
        fields = {"resource": resource, "wait_ms": wait_ms}
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
        return self.request("acquire", **fields)["lock"]

    lock = acquire  # reads well in `with client.lock(...) as lock:`

    def release(self, resource, token):
        """Releases the lock `token` holds on `resource`: this connection's, or a detached
        lease from any connection (LockError not_held: no such hold; forbidden: another uid's)."""
        self.request("release", resource=resource, token=token)

    def extend(self, resource, token, ttl_ms=None):
        """Resets the ttl of the hold of `token` (as release) to ttl_ms; returns the new
        validity_ms."""
        fields = {"resource": resource, "token": token}
        if ttl_ms is not None:
            fields["ttl_ms"] = ttl_ms
        return self.request("extend", **fields)["validity_ms"]

    def campaign(self, name, value, ttl_ms=None, wait_ms=None):
        """Waits up to wait_ms (default: the agent's max_wait_ms) to lead election `name`,
        announcing `value` (e.g. host:port). Returns a Leadership (term, token, validity_ms,
        waited_ms) that lasts while this connection lives; raises LockError (timeout: another
        led for all of wait_ms; no_quorum, kind_mismatch, forbidden...)."""
        fields = {"name": name, "value": value}
        if ttl_ms is not None:
            fields["ttl_ms"] = ttl_ms
        if wait_ms is not None:
            fields["wait_ms"] = wait_ms
        return self.request("campaign", **fields)["lock"]

    def resign(self, name, token):
        """Stops leading `name` (LockError not_held: `token` does not lead it here now)."""
        self.request("resign", name=name, token=token)

    def leader(self, name):
        """Who leads `name` now: a dict (value, agent, host, pid, since, term) or None."""
        return self.request("leader", name=name)["leader"]

    def observe(self, name):
        """Follows election `name`: returns an Observation holding the current leader, then
        receiving every change. Observing a name again starts it over (a new Observation)."""
        return self.request("observe", name=name)["observation"]

    def unobserve(self, name):
        """Stops the events of `name` (LockError not_held: not observed)."""
        self.request("unobserve", name=name)
        with self._mutex:
            observation = self._observations.pop(name, None)
        if observation:
            observation._end("unobserved")

    def ping(self):
        self.request("ping")

    def held(self):
        return self.request("held")["locks"]

    def health(self):
        return self.request("health")

    def close(self):
        """Closes the connection; the agent releases every lock this client still holds."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if threading.current_thread() is not self._reader:  # e.g. close() from on_lost
            self._reader.join()
            self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _forget(self, lock):
        with self._mutex:
            self._locks.pop(lock.token, None)

    def _read_loop(self):
        reason = "connection closed by the agent"
        try:
            with self._sock.makefile("rb") as stream:
                for raw in stream:
                    self._dispatch(json.loads(raw))
        except (OSError, ValueError) as e:
            reason = str(e)
        reason = self._unasked or reason
        with self._mutex:
            self._closed = reason
            pending, self._pending = self._pending, {}
            locks, self._locks = self._locks, {}
            observations, self._observations = self._observations, {}
        for slot in pending.values():
            slot.finish({"ok": False, "error": "disconnected", "message": reason})
        for lock in locks.values():
            lock._mark_lost("disconnected")
        for observation in observations.values():
            observation._end("disconnected")

    def _dispatch(self, msg):
        if "event" in msg:
            if msg["event"] == "lost":
                with self._mutex:
                    lock = self._locks.pop(msg.get("token"), None)
                if lock:
                    lock._mark_lost(msg.get("reason", "lost"))
            elif msg["event"] == "leader":
                with self._mutex:
                    observation = self._observations.get(msg.get("name"))
                if observation:
                    observation._push(msg)
            return
        replaced = None
        with self._mutex:
            slot = self._pending.pop(msg.get("id"), None)
            # Registered before anyone else sees the reply, so an event that follows at once
            # (`lost`, `leader`) still finds what it is for.
            if slot and msg.get("ok") and slot.op == "acquire":
                detached = bool(slot.fields.get("detach"))
                msg["lock"] = Lock(self, msg["resource"], msg, detached)
                if not detached:  # no `lost` comes for a detached lease, nor ends it here
                    self._locks[msg["token"]] = msg["lock"]
            elif slot and msg.get("ok") and slot.op == "campaign":
                msg["lock"] = Leadership(self, msg["name"], msg)
                self._locks[msg["token"]] = msg["lock"]
            elif slot and msg.get("ok") and slot.op == "observe":
                msg["observation"] = Observation(self, msg["name"], msg)
                replaced = self._observations.get(msg["name"])
                self._observations[msg["name"]] = msg["observation"]
        if replaced:
            replaced._end("observed again")
        if slot:
            slot.finish(msg)
        elif msg.get("ok") is False:
            self._unasked = "%s: %s" % (msg.get("error"), msg.get("message"))  # e.g. too_many


class _Pending:
    """A request waiting for its reply."""

    def __init__(self, op, fields):
        self.op = op
        self.fields = fields
        self.reply = None
        self.done = threading.Event()

    def finish(self, reply):
        self.reply = reply
        self.done.set()
