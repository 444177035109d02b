"""Who may use `rag mcp --http`, and how many sessions they may hold.

The server binds 127.0.0.1, but every local user reaches a loopback port: on its own it would
hand any of them the whole index (issue 38). So:

- **A bearer token.** Every request must carry `Authorization: Bearer <token>`; anything else
  gets 401 before a byte of its body is read or any session or tool is touched. The token is
  RAG_MCP_TOKEN, or a random one generated into RAG_HOME/mcp-token (mode 0600, in the 0700
  RAG_HOME) on first use — readable by the user who owns the index, i.e. by whoever could read
  the data anyway. Compared in constant time.
- **Session caps with eviction, not refusal**: `sessions.py`.
- **Connection deadlines and caps**, before a request is read: `connections.py`.
"""

import hashlib
import hmac
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rag_pipeline.mcp.asgi import ASGIApp, Receive, Scope, Send, header_value, respond
from rag_pipeline.mcp.sessions import SessionLimiter
from rag_pipeline.settings import ConfigError, Settings

if TYPE_CHECKING:
    import uvicorn

logger = logging.getLogger(__name__)

TOKEN_FILE = "mcp-token"
LOOPBACK = "127.0.0.1"
# What h11 allows by default, stated: the request line and headers together.
_MAX_HEADER_BYTES = 16 * 1024
# A request's body may take this many times RAG_MCP_HEADER_SECONDS once its headers are in.
_BODY_FACTOR = 3
_MIN_TOKEN_CHARS = 16


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


class BearerAuth:
    """ASGI middleware: 401 for any HTTP request without the right bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        """Guard `app` with `token`."""
        self.app = app
        # Digests have one length: the comparison takes the same time for any wrong token.
        self._digest = hashlib.sha256(token.encode()).digest()

    def authorized(self, scope: Scope) -> bool:
        """True when the request carries the token."""
        header = header_value(scope, b"authorization") or b""
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
        await respond(
            send,
            401,
            "Unauthorized: send 'Authorization: Bearer <token>' (the token of `rag mcp --http`)",
            [(b"www-authenticate", b'Bearer realm="rag-mcp"')],
        )


def http_app(app: ASGIApp, settings: Settings, token: str) -> ASGIApp:
    """`app` (the SDK's streamable HTTP app) behind the token check and the session caps."""
    limited = SessionLimiter(
        app,
        max_sessions=settings.mcp_max_sessions,
        per_client=settings.mcp_max_sessions_per_client,
        idle_seconds=settings.mcp_session_idle_seconds,
    )
    return BearerAuth(limited, token)


def http_config(app: ASGIApp, settings: Settings, port: int) -> "uvicorn.Config":
    """The uvicorn configuration of `rag mcp --http`: loopback, headers of 16 KiB at most,
    5 s keep-alive, no proxy headers, no WebSocket, and the connection limits of
    `mcp_connections.py` (on uvicorn's h11 protocol)."""
    import uvicorn

    from rag_pipeline.mcp.connections import ConnectionLimits, bounded_protocol

    limits = ConnectionLimits(
        header_seconds=settings.mcp_header_seconds,
        body_seconds=_BODY_FACTOR * settings.mcp_header_seconds,
        max_connections=settings.mcp_max_connections,
        # On loopback every local user is one address: half is left for the others.
        max_per_client=max(1, settings.mcp_max_connections // 2),
    )
    return uvicorn.Config(
        app,
        host=LOOPBACK,
        port=port,
        log_level="warning",
        http=bounded_protocol(limits),
        ws="none",
        # Otherwise X-Forwarded-For from loopback is believed: any local user picks an address.
        proxy_headers=False,
        timeout_keep_alive=5,
        h11_max_incomplete_event_size=_MAX_HEADER_BYTES,
    )
