"""Limits on the connections of `rag mcp --http`, before any request reaches the app (issue 49).

Without them, slow-header connections (a few bytes of headers, never finished) held by anyone
on the machine took the server to its open-file limit, and a request with the valid token got
no answer. uvicorn (0.55) bounds a header's size (`h11_max_incomplete_event_size`) and the
idle time after a response (`timeout_keep_alive`), but not the time a client may take to send
its request, nor the number of connections: `limit_concurrency` answers 503 to every request
once that many connections are open, so slow-header connections would lock the token holder
out all the same.

The least code that adds what is missing is this subclass of uvicorn's own h11 protocol:

- **a header deadline**: a connection whose request headers are not complete `header_seconds`
  after it opened (or after its previous response) is closed;
- **a body deadline**: a request whose body is not complete `body_seconds` after its headers
  is cut (the app sees a disconnect);
- **caps on open connections, per client address and in total**: a new connection past a cap
  closes the longest-waiting connection that has not sent its headers yet (of that client,
  else of all); when every connection is serving a request, the new one is closed. A
  slow-header flood thus evicts itself, and a client that sends its request at once is
  served. On loopback every local user has the address 127.0.0.1, so there the two caps act
  alike; the token stays the security boundary.
"""

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, cast

from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle


@dataclass(frozen=True)
class ConnectionLimits:
    """The limits of one server (from the RAG_MCP_* settings)."""

    header_seconds: float
    body_seconds: float
    max_connections: int
    max_per_client: int


@dataclass
class _Registry:
    """The open connections of one server; those still waiting for headers, oldest first."""

    limits: ConnectionLimits
    waiting: "OrderedDict[BoundedH11Protocol, str]" = field(default_factory=OrderedDict)
    open: "dict[BoundedH11Protocol, str]" = field(default_factory=dict)

    def admit(self, conn: "BoundedH11Protocol", client: str) -> bool:
        """Make room for `conn` by closing a waiting connection if a cap is reached."""
        same = sum(1 for owner in self.open.values() if owner == client)
        if same >= self.limits.max_per_client and not self._evict(client):
            return False
        if len(self.open) >= self.limits.max_connections and not self._evict(None):
            return False
        self.open[conn] = client
        self.waiting[conn] = client
        return True

    def _evict(self, client: str | None) -> bool:
        for victim, owner in self.waiting.items():
            if client is None or owner == client:
                victim.cut()
                return True
        return False

    def forget(self, conn: "BoundedH11Protocol") -> None:
        self.open.pop(conn, None)
        self.waiting.pop(conn, None)


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the deadlines and caps of the module docstring."""

    registry: _Registry  # set on the subclass `bounded_protocol` makes

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """As uvicorn's; the deadline timer starts with the connection."""
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._phase = "headers"

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Admit the connection under the caps and start its header deadline."""
        super().connection_made(transport)
        client = self.client[0] if self.client else "?"
        if not self.registry.admit(self, client):
            self.cut()
            return
        self._arm("headers", self.registry.limits.header_seconds)

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection and its timer."""
        self._disarm()
        self.registry.forget(self)
        super().connection_lost(exc)

    def handle_events(self) -> None:
        """uvicorn's parsing, then the deadline of the request's next part (or none)."""
        super().handle_events()
        cycle = cast("RequestResponseCycle | None", self.cycle)  # None until a request came
        if cycle is None or cycle.response_complete or self.transport.is_closing():
            return
        self.registry.waiting.pop(self, None)  # headers are in
        if cycle.more_body:
            if self._phase == "headers":
                self._arm("body", self.registry.limits.body_seconds)
        elif self._phase != "app":
            self._phase = "app"  # the app's own time is bounded by the tools' timeouts
            self._disarm()

    def on_response_complete(self) -> None:
        """The next request on this connection gets a header deadline of its own."""
        if not self.transport.is_closing():
            self.registry.waiting[self] = self.registry.open.get(self, "?")
            self._arm("headers", self.registry.limits.header_seconds)
        super().on_response_complete()

    def cut(self) -> None:
        """Close the connection now (a request in progress sees a disconnect)."""
        self._disarm()
        self.registry.forget(self)
        cycle = cast("RequestResponseCycle | None", self.cycle)
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            cycle.message_event.set()
        if not self.transport.is_closing():
            self.transport.close()

    def _arm(self, phase: str, seconds: float) -> None:
        self._disarm()
        self._phase = phase
        self._deadline = self.loop.call_later(seconds, self.cut)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None


def bounded_protocol(limits: ConnectionLimits) -> type[BoundedH11Protocol]:
    """A protocol class for `uvicorn.Config(http=...)` sharing one registry of connections."""
    return type("BoundedH11", (BoundedH11Protocol,), {"registry": _Registry(limits)})
