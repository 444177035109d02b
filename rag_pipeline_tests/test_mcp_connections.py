"""Issue 49 (3): slow-header connections cannot lock the token holder out of `rag mcp --http`.

The server here is `rag mcp --http`'s own uvicorn configuration (`http_config`) and token
check in front of a small app, on loopback, in a thread.
"""

import socket
import threading
import time
from collections.abc import Iterator

import httpx2
import pytest
import uvicorn

from rag_pipeline.mcp.asgi import Receive, Scope, Send, respond
from rag_pipeline.mcp.http import BearerAuth, http_config
from rag_pipeline.settings import load_settings

pytestmark = pytest.mark.unit

TOKEN = "test-token-0123456789abcdef"
_HEADER_SECONDS = 1.5
_BODY_SECONDS = 3 * _HEADER_SECONDS
_MAX_CONNECTIONS = 40


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await respond(send, 200, f"read {len(body)} bytes", [])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def port() -> Iterator[int]:
    settings = load_settings(
        mcp_header_seconds=_HEADER_SECONDS, mcp_max_connections=_MAX_CONNECTIONS
    )
    number = _free_port()
    server = uvicorn.Server(http_config(BearerAuth(_app, TOKEN), settings, number))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield number
    server.should_exit = True
    thread.join(timeout=30)


def _slow(port: int, count: int) -> list[socket.socket]:
    """`count` connections that send part of their headers and then nothing."""
    held = []
    for _ in range(count):
        conn = socket.create_connection(("127.0.0.1", port), timeout=10)
        conn.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        held.append(conn)
    return held


def _closed_within(conn: socket.socket, seconds: float) -> bool:
    conn.settimeout(seconds)
    try:
        while conn.recv(4096):
            pass
    except TimeoutError:
        return False
    except OSError:
        return True
    return True


def _ask(port: int, token: str = TOKEN) -> httpx2.Response:
    return httpx2.post(
        f"http://127.0.0.1:{port}/mcp",
        content=b"{}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )


def test_a_flood_of_slow_header_connections_leaves_the_token_holder_served(port: int) -> None:
    held = _slow(port, 5 * _MAX_CONNECTIONS)
    try:
        started = time.monotonic()
        answer = _ask(port)
        assert answer.status_code == 200, answer.text
        assert "read 2 bytes" in answer.text
        assert time.monotonic() - started < 5
        assert _ask(port, "wrong-token-0123456789").status_code == 401
        # All but the last cap's worth were closed to make room; those are closed at the
        # header deadline.
        waited = time.monotonic()
        assert all(_closed_within(conn, _HEADER_SECONDS + 5) for conn in held)
        assert time.monotonic() - waited < _HEADER_SECONDS + 5
    finally:
        for conn in held:
            conn.close()


def test_a_slow_header_connection_is_closed_at_the_deadline(port: int) -> None:
    (conn,) = _slow(port, 1)
    with conn:
        started = time.monotonic()
        assert _closed_within(conn, _HEADER_SECONDS + 5)
        assert _HEADER_SECONDS - 0.5 < time.monotonic() - started < _HEADER_SECONDS + 5


def test_a_slow_body_is_cut_at_the_body_deadline(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n"
            + f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
            + b"x" * 10
        )
        started = time.monotonic()
        assert _closed_within(conn, _BODY_SECONDS + 5)
        assert time.monotonic() - started < _BODY_SECONDS + 5
    assert _ask(port).status_code == 200


def test_a_kept_alive_connection_gets_a_new_header_deadline(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        request = (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n"
            + f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        conn.sendall(request)
        assert b"200" in conn.recv(4096).split(b"\r\n", 1)[0]
        conn.sendall(b"POST /mcp HTTP/1.1\r\nHost: ")  # then nothing
        assert _closed_within(conn, 10)
