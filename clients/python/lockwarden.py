"""Client for the lockwarden agent's Unix socket (docs/protocol.md). Python 3.7+, stdlib only.

    import lockwarden

    with lockwarden.Client() as client:
        with client.lock("db/migrations", ttl_ms=30000, wait_ms=5000, renew=True) as lock:
            migrate(stop_if=lambda: lock.lost)

One Client is one connection, that is one agent session: its locks are released when it closes.
A background thread reads the socket continuously, hands each reply to the request with the
same id, and marks a Lock as lost when the agent pushes a `lost` event for it. A Client may be
shared by threads.
"""

import itertools
import json
import os
import socket
import threading

DEFAULT_SOCKET = "/run/lockwarden/lockwarden.sock"

__all__ = ["Client", "Lock", "LockError", "LockLost", "DEFAULT_SOCKET", "default_socket"]


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
    (a semaphore's); `permit` is which permit (0..K-1) for a semaphore's, else None."""

    def __init__(self, client, resource, reply):
        self.client = client
        self.resource = resource
        self.token = reply["token"]
        self.validity_ms = reply["validity_ms"]
        self.waited_ms = reply.get("waited_ms", 0)
        self.fence = reply.get("fence")
        self.mode = reply.get("mode", "exclusive")
        self.permit = reply.get("permit")
        self.lost = None
        self.released = False
        self.on_lost = None
        self._lost_event = threading.Event()

    def extend(self, ttl_ms=None):
        """Resets the lock's ttl to ttl_ms from now; returns the new validity_ms."""
        self.check()
        fields = {"resource": self.resource, "token": self.token}
        if ttl_ms is not None:
            fields["ttl_ms"] = ttl_ms
        self.validity_ms = self.client.request("extend", **fields)["validity_ms"]
        return self.validity_ms

    def release(self):
        """Gives the lock back. No-op if it was already released or lost."""
        if self.released or self.lost:
            return
        self.client.request("release", resource=self.resource, token=self.token)
        self.released = True
        self.client._forget(self)

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
        self._closed = None  # reason once the connection is gone
        self._unasked = None  # an error line with no id (sent before the agent closes)
        self._reader = threading.Thread(target=self._read_loop, name="lockwarden", daemon=True)
        self._reader.start()

    def request(self, op, **fields):
        """Sends one request and returns its reply (a dict); raises LockError if ok is false."""
        slot = _Pending(op)
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
                shared=False):
        """Takes the lock, waiting up to wait_ms for another holder. With renew=True the agent
        extends it every ttl/3 while this connection is open. permits=K takes one permit of a
        semaphore of K (at most K holders at once); shared=True a read hold (readers share, an
        exclusive hold excludes them); neither, the exclusive hold. Returns a Lock; raises
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
        return self.request("acquire", **fields)["lock"]

    lock = acquire  # reads well in `with client.lock(...) as lock:`

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
        for slot in pending.values():
            slot.finish({"ok": False, "error": "disconnected", "message": reason})
        for lock in locks.values():
            lock._mark_lost("disconnected")

    def _dispatch(self, msg):
        if "event" in msg:
            if msg["event"] == "lost":
                with self._mutex:
                    lock = self._locks.pop(msg.get("token"), None)
                if lock:
                    lock._mark_lost(msg.get("reason", "lost"))
            return
        with self._mutex:
            slot = self._pending.pop(msg.get("id"), None)
            if slot and slot.op == "acquire" and msg.get("ok"):
                # Registered before anyone else sees the reply, so a `lost` event that follows
                # at once still finds its lock.
                msg["lock"] = Lock(self, msg["resource"], msg)
                self._locks[msg["token"]] = msg["lock"]
        if slot:
            slot.finish(msg)
        elif msg.get("ok") is False:
            self._unasked = "%s: %s" % (msg.get("error"), msg.get("message"))  # e.g. too_many


class _Pending:
    """A request waiting for its reply."""

    def __init__(self, op):
        self.op = op
        self.reply = None
        self.done = threading.Event()

    def finish(self, reply):
        self.reply = reply
        self.done.set()
