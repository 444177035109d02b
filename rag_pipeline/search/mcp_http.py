"""Who may use `rag mcp --http`, and how many sessions they may hold.

The server binds 127.0.0.1, but every local user reaches a loopback port: on its own it would
hand any of them the whole index (issue 38). So:

- **A bearer token.** Every request must carry `Authorization: Bearer <token>`; anything else
  gets 401 before a byte of its body is read or any session or tool is touched. The token is
  RAG_MCP_TOKEN, or a random one generated into RAG_HOME/mcp-token (mode 0600, in the 0700
  RAG_HOME) on first use — readable by the user who owns the index, i.e. by whoever could read
  the data anyway. Compared in constant time.
- **Session caps with eviction, not refusal.** The MCP SDK keeps up to 10,000 sessions, each
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

import hashlib
import hmac
import json
import logging
import os
import secrets
import stat
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from rag_pipeline.settings import ConfigError, Settings

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_FILE = "mcp-token"
_MIN_TOKEN_CHARS = 16
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


@dataclass(frozen=True)
class Token:
    """The bearer token and where it comes from (None: the RAG_MCP_TOKEN setting)."""

    value: str
    path: Path | None

    @property
    def origin(self) -> str:
        """Where a person finds the token."""
        return str(self.path) if self.path else "the RAG_MCP_TOKEN setting"


def ensure_token(settings: Settings) -> Token:
    """RAG_MCP_TOKEN, else the token of RAG_HOME/mcp-token, created (0600) if missing.

    Raises:
        ConfigError: the token file is readable by others, owned by another user, or too short.
    """
    if settings.mcp_token is not None:
        return Token(settings.mcp_token.get_secret_value(), None)
    from rag_pipeline.store.server import private_home

    path = private_home(settings) / TOKEN_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return Token(_read_token(path), path)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(secrets.token_urlsafe(32) + "\n")
    logger.info("generated the MCP token in %s", path)
    return Token(_read_token(path), path)


def _read_token(path: Path) -> str:
    fix = f"delete {path} for a new one, or set RAG_MCP_TOKEN"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ConfigError(f"cannot read the MCP token {path}: {exc.strerror}; {fix}") from exc
    with os.fdopen(fd, encoding="utf-8", errors="replace") as source:
        info = os.fstat(source.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            raise ConfigError(f"the MCP token {path} is not a file of this user; {fix}")
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise ConfigError(
                f"the MCP token {path} is readable by other users (mode "
                f"{stat.S_IMODE(info.st_mode):o}); chmod 600 it if nobody else read it, else {fix}"
            )
        value = source.read(4096).strip()
    if len(value) < _MIN_TOKEN_CHARS or any(c.isspace() or not c.isprintable() for c in value):
        raise ConfigError(
            f"the MCP token in {path} must be {_MIN_TOKEN_CHARS} or more printable characters "
            f"without spaces; {fix}"
        )
    return value


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value)
    return None


async def _respond(
    send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]]
) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BearerAuth:
    """ASGI middleware: 401 for any HTTP request without the right bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        """Guard `app` with `token`."""
        self.app = app
        # Digests have one length: the comparison takes the same time for any wrong token.
        self._digest = hashlib.sha256(token.encode()).digest()

    def authorized(self, scope: Scope) -> bool:
        """True when the request carries the token."""
        header = _header(scope, b"authorization") or b""
        scheme, _, presented = header.partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        digest = hashlib.sha256(presented.strip()).digest()
        return hmac.compare_digest(digest, self._digest)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request if it carries the token, else answer 401."""
        if scope["type"] != "http" or self.authorized(scope):
            await self.app(scope, receive, send)
            return
        await _respond(
            send,
            401,
            "Unauthorized: send 'Authorization: Bearer <token>' (the token of `rag mcp --http`)",
            [(b"www-authenticate", b'Bearer realm="rag-mcp"')],
        )


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
        session_id = _header(scope, _SESSION_HEADER)
        if session_id is not None:
            await self._in_session(session_id.decode("latin-1"), scope, receive, send)
            return
        version = _header(scope, _VERSION_HEADER)
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
            body = await _read_body(receive, _MAX_BODY)
            if body is None:
                await _respond(send, 413, "Payload too large", [])
                return
            request_id = _request_id(body)
            receive = _replay(body, receive)
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
        body = await _read_body(receive, _MAX_OPENING_BODY)
        if body is None:
            await _respond(send, 413, "Payload too large for an opening request", [])
            return
        client = _client_key(scope, body)
        async with self._lock:
            refusal = await self._make_room(client, scope)
            if refusal is None:
                self._pending[client] = self._pending.get(client, 0) + 1
        if refusal is not None:
            status, message = refusal
            logger.warning("refused a new MCP session of %s: %s", client, message)
            await _respond(send, status, message, [(b"retry-after", b"5")])
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
            await self.app(scope, _replay(body, receive), watch)
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
        version = _header(scope, _VERSION_HEADER)
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


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None past `limit` bytes."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = bytes(message.get("body", b""))
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives `body` once, then what the connection says (a disconnect)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _json_object(data: object) -> dict[str, Any]:
    """`data` (bytes of JSON, or a parsed value) when it is a JSON object, else {}."""
    if isinstance(data, bytes):
        try:
            data = json.loads(data)
        except ValueError:
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


def http_app(app: ASGIApp, settings: Settings, token: str) -> ASGIApp:
    """`app` (the SDK's streamable HTTP app) behind the token check and the session caps."""
    limited = SessionLimiter(
        app,
        max_sessions=settings.mcp_max_sessions,
        per_client=settings.mcp_max_sessions_per_client,
        idle_seconds=settings.mcp_session_idle_seconds,
    )
    return BearerAuth(limited, token)
