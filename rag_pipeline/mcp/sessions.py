"""How many sessions the clients of `rag mcp --http` may hold (the token check is in
`http.py`).

**Session caps with eviction, not refusal.** The MCP SDK keeps up to 10,000 sessions, each
for 30 idle minutes, and refuses everyone with 503 once they are taken: one client calling
`initialize` in a loop locked all others out for half an hour. Here a session idle for
RAG_MCP_SESSION_IDLE_SECONDS is closed; a client (its address and the name it gives at
`initialize`) holds at most RAG_MCP_MAX_SESSIONS_PER_CLIENT sessions, past which its own
idle-longest one is closed; at RAG_MCP_MAX_SESSIONS in total the idle-longest of all is
closed. A new client is refused (503) only while every session has a request running.
Sessions are closed the protocol's own way: a DELETE with the session id, sent to the SDK's
app from here. A token holder can give any client name, so the per-client cap keeps
cooperating clients out of each other's way; the token is the security boundary.

Clients of the 2026 protocol revision hold no session (each request stands alone): they need
the token, the caps do not concern them.
"""

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from rag_pipeline.core.json_limits import loads_bounded
from rag_pipeline.mcp.asgi import (
    ASGIApp,
    Message,
    Receive,
    Scope,
    Send,
    header_value,
    read_body,
    replay_body,
    respond,
)

logger = logging.getLogger(__name__)

_SESSION_HEADER = b"mcp-session-id"
_VERSION_HEADER = b"mcp-protocol-version"
# An opening request is an `initialize`: a few hundred bytes. It is read whole (to learn the
# client's name) before the SDK's own 4 MiB limit applies, so it gets a limit of its own.
_MAX_OPENING_BODY = 256 * 1024
_MAX_CLIENT_NAME = 64
# Requests within a session are read whole too (to learn the JSON-RPC id a disconnect
# cancels); the SDK's own limit.
_MAX_BODY = DEFAULT_MAX_REQUEST_BODY_SIZE
# The SDK reaps an idle session itself; this side forgets it a little later, so it never
# counts fewer sessions than the SDK holds.
_FORGET_GRACE_SECONDS = 2.0


@dataclass
class _Session:
    client: str
    last_used: float
    in_flight: int = 0

    def idle(self) -> bool:
        return self.in_flight == 0


class SessionLimiter:
    """ASGI middleware capping the SDK's sessions per client and in total (see the module)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_sessions: int,
        per_client: int,
        idle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Cap `app`'s sessions: `max_sessions` in all, `per_client` for one client."""
        self.app = app
        self.max_sessions = max_sessions
        self.per_client = per_client
        self.idle_seconds = idle_seconds
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self._pending: dict[str, int] = {}
        self._lock = anyio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Account for the request's session; make room before one opens."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session_id = header_value(scope, _SESSION_HEADER)
        if session_id is not None:
            await self._in_session(session_id.decode("latin-1"), scope, receive, send)
            return
        version = header_value(scope, _VERSION_HEADER)
        sessionless = (
            version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS
        )
        if sessionless or scope.get("method") != "POST":
            # The 2026 revision holds no session; only a POST `initialize` opens one (the SDK
            # refuses anything else without a session id).
            await self.app(scope, receive, send)
            return
        await self._opening(scope, receive, send)

    async def _in_session(
        self, session_id: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        request_id: object = None
        if scope.get("method") == "POST":
            body = await read_body(receive, _MAX_BODY)
            if body is None:
                await respond(send, 413, "Payload too large", [])
                return
            request_id = _request_id(body)
            receive = replay_body(body, receive)
        session = self._sessions.get(session_id)
        if session is not None:
            session.in_flight += 1
        answered: list[int] = [0]  # the response's status, once sent
        finished = False
        cancelled = False

        async def watch(message: Message) -> None:
            nonlocal finished
            if message["type"] == "http.response.start":
                answered[0] = int(message["status"])
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                finished = True
            await send(message)

        async def listen() -> Message:
            # A client that goes away before its answer came cancels the request, so its
            # statement stops too (the SDK would let it run to its end for nobody).
            nonlocal cancelled
            message = await receive()
            if (
                message["type"] == "http.disconnect"
                and request_id is not None
                and not finished
                and not cancelled
            ):
                cancelled = True
                await self._cancel(session_id, request_id, scope)
            return message

        try:
            await self.app(scope, listen, watch)
        finally:
            if session is not None:
                session.in_flight -= 1
                session.last_used = self._clock()
            status = answered[0]
            if status == 404 or (scope.get("method") == "DELETE" and 200 <= status < 300):
                self._sessions.pop(session_id, None)

    async def _opening(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_body(receive, _MAX_OPENING_BODY)
        if body is None:
            await respond(send, 413, "Payload too large for an opening request", [])
            return
        client = _client_key(scope, body)
        async with self._lock:
            refusal = await self._make_room(client, scope)
            if refusal is None:
                self._pending[client] = self._pending.get(client, 0) + 1
        if refusal is not None:
            status, message = refusal
            logger.warning("refused a new MCP session of %s: %s", client, message)
            await respond(send, status, message, [(b"retry-after", b"5")])
            return
        opened: str | None = None

        async def watch(message: Message) -> None:
            nonlocal opened
            if message["type"] == "http.response.start" and int(message["status"]) < 400:
                for key, value in message.get("headers", ()):
                    if bytes(key).lower() == _SESSION_HEADER:
                        opened = bytes(value).decode("latin-1")
                        self._sessions[opened] = _Session(client, self._clock(), in_flight=1)
            await send(message)

        try:
            await self.app(scope, replay_body(body, receive), watch)
        finally:
            self._pending[client] -= 1
            if not self._pending[client]:
                del self._pending[client]
            if opened is not None and opened in self._sessions:
                session = self._sessions[opened]
                session.in_flight -= 1
                session.last_used = self._clock()

    async def _make_room(self, client: str, scope: Scope) -> tuple[int, str] | None:
        """Close sessions so one more fits; (status, reason) when none can be closed."""
        self._forget_expired()
        own = [sid for sid, s in self._sessions.items() if s.client == client]
        crowded = len(own) + self._pending.get(client, 0) >= self.per_client
        if crowded and not await self._evict(own, scope):
            return 429, f"Too many sessions for this client ({self.per_client} are busy)"
        total = len(self._sessions) + sum(self._pending.values())
        if total >= self.max_sessions and not await self._evict(list(self._sessions), scope):
            return 503, f"Too many open sessions ({self.max_sessions} are busy)"
        return None

    def _forget_expired(self) -> None:
        limit = self._clock() - self.idle_seconds - _FORGET_GRACE_SECONDS
        for sid in [s for s, v in self._sessions.items() if v.idle() and v.last_used < limit]:
            del self._sessions[sid]

    async def _evict(self, candidates: list[str], scope: Scope) -> bool:
        idle = [sid for sid in candidates if self._sessions[sid].idle()]
        if not idle:
            return False
        oldest = min(idle, key=lambda sid: self._sessions[sid].last_used)
        del self._sessions[oldest]
        logger.info("closing the idle MCP session %s to make room", oldest[:16])
        await self._close(oldest, scope)
        return True

    async def _close(self, session_id: str, scope: Scope) -> None:
        """End a session through the SDK's app, as a client's DELETE would."""
        await self._internal(scope, "DELETE", session_id, b"")

    async def _cancel(self, session_id: str, request_id: object, scope: Scope) -> None:
        """Tell the session its request `request_id` is cancelled, as the client would."""
        message = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "the client went away"},
        }
        logger.info("client of session %s went away; cancelling its request", session_id[:16])
        await self._internal(scope, "POST", session_id, json.dumps(message).encode())

    async def _internal(self, scope: Scope, method: str, session_id: str, body: bytes) -> None:
        """A request of our own to the SDK's app, in `session_id`; its answer is dropped."""
        host, port = scope.get("server") or ("127.0.0.1", 0)
        headers = [
            (b"host", f"{host}:{port}".encode()),
            (_SESSION_HEADER, session_id.encode()),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
        ]
        version = header_value(scope, _VERSION_HEADER)
        if version is not None:
            headers.append((_VERSION_HEADER, version))
        internal: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": scope["path"],
            "raw_path": scope["path"].encode(),
            "root_path": scope.get("root_path", ""),
            "query_string": b"",
            "headers": headers,
            "client": ("127.0.0.1", 0),
            "server": scope.get("server"),
        }
        if "state" in scope:
            internal["state"] = scope["state"]
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await anyio.sleep_forever()
            raise AssertionError  # unreachable

        async def discard(message: Message) -> None:
            return None

        await self.app(internal, receive, discard)


def _json_object(data: object) -> dict[str, Any]:
    """`data` (bytes of JSON, or a parsed value) when it is a JSON object, else {}."""
    if isinstance(data, bytes):
        try:
            data = loads_bounded(data)
        except ValueError:  # not JSON, or nested too deeply (issue 49): the SDK answers it
            return {}
    return cast(dict[str, Any], data) if isinstance(data, dict) else {}


def _request_id(body: bytes) -> object:
    """The id of the JSON-RPC request in `body` (None for a notification, a reply, a batch)."""
    message = _json_object(body)
    found = message.get("id")
    return found if "method" in message and isinstance(found, str | int) else None


def _client_key(scope: Scope, body: bytes) -> str:
    """The client's address and the name it gives in `initialize` ('' when none)."""
    client = scope.get("client")
    address = str(client[0]) if client else "?"
    info = _json_object(_json_object(_json_object(body).get("params")).get("clientInfo"))
    name = info.get("name")
    return f"{address}|{name[:_MAX_CLIENT_NAME] if isinstance(name, str) else ''}"
