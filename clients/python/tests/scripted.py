"""A stand-in for the agent that a test scripts line by line: a Unix socket in a temporary
directory that accepts one client, hands the test each request line the client sends, and sends
whatever lines the test writes (replies, events, or lines the client cannot read). For what
only such an agent can do on cue: a reply that races a cancellation, a line that is not JSON.

Its calls block (with the EVENT_S deadline, which only a failing test waits out); an asyncio
test makes them in a thread (asyncio.to_thread)."""

from __future__ import annotations

import json
import os
import socket
import tempfile
from typing import Any, Dict, Optional, Union

from harness import EVENT_S

Json = Dict[str, Any]


class ScriptedAgent:
    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="lw-scripted-")
        self.path = os.path.join(self._dir.name, "agent.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(1)
        self._listener.settimeout(EVENT_S)
        self._conn: Optional[socket.socket] = None
        self._stream: Any = None

    def accept(self) -> None:
        """Takes the client's connection (it connects first)."""
        self._conn, _ = self._listener.accept()
        self._conn.settimeout(EVENT_S)
        self._stream = self._conn.makefile("rb")

    def request(self, missing: str = "the client sent no request") -> Json:
        """The next request the client sent; AssertionError(missing) if it sent none in
        EVENT_S."""
        try:
            line = self._stream.readline()
        except socket.timeout:
            raise AssertionError(missing) from None
        if not line:
            raise AssertionError("the client closed the connection instead of sending")
        message = json.loads(line)
        assert isinstance(message, dict)
        return message

    def send(self, line: Union[Json, bytes]) -> None:
        """Sends a message (a dict, as one JSON line) or raw bytes as they are."""
        assert self._conn is not None
        data = line if isinstance(line, bytes) else (json.dumps(line) + "\n").encode()
        self._conn.sendall(data)

    def grant(self, request: Json, **fields: Any) -> Json:
        """Answers an acquire or campaign with a grant; returns the reply sent."""
        reply: Json = {"id": request["id"], "ok": True, "token": "%040x" % request["id"],
                       "validity_ms": 1000}
        if request["op"] == "acquire":
            reply["resource"] = request["resource"]
        else:
            reply.update(name=request["name"], term=request["id"])
        reply.update(fields)
        self.send(reply)
        return reply

    def ok(self, request: Json, **fields: Any) -> None:
        self.send(dict({"id": request["id"], "ok": True}, **fields))

    def wait_end(self) -> None:
        """Returns once the client has shut its connection down (its side reads the end);
        AssertionError if it sends a request instead or keeps the connection for EVENT_S."""
        try:
            line = self._stream.readline()
        except socket.timeout:
            raise AssertionError("the client kept its connection") from None
        if line:
            raise AssertionError("the client sent %r instead of ending" % line)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        if self._conn is not None:
            self._conn.close()
        self._listener.close()
        self._dir.cleanup()
