"""Local stand-ins for LLM APIs: HTTP servers speaking the Anthropic Messages and OpenAI
chat-completions wire formats, streaming answers as server-sent events.

Each server records the requests it receives and answers from a script of faults, one per
request (`None` = answer normally): an HTTP status with headers (401, 429 + Retry-After,
500, 503), a `Hang` (no response until the client times out), a malformed stream, a stream cut
before its end — and what a hostile endpoint does: keep-alives and no answer (`KeepAlive`), an
answer that never ends (`Drip`), far more answer than asked for (`Flood`), a line that never
ends (`EndlessLine`). `bytes_sent` records what each answer wrote before the client hung up.
The answer is canned text, or by default an extractive answer built from the
numbered sources in the request, citing them — so a README example run against it shows real
retrieved content.

Run one by hand: `python -m rag_pipeline_tests.llm_servers openai --port 8765`.
"""

import argparse
import contextlib
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Wire = Literal["anthropic", "openai"]
AnswerFn = Callable[[str], str]


@dataclass(frozen=True)
class Status:
    """Answer with this HTTP status, headers and the API's error JSON."""

    code: int
    headers: dict[str, str] = field(default_factory=dict[str, str])
    message: str = "canned failure"


@dataclass(frozen=True)
class Hang:
    """Send nothing for `seconds` (or until the server stops): the client's timeout fires."""

    seconds: float = 30.0


@dataclass(frozen=True)
class Malformed:
    """A 200 event stream whose second event is not JSON."""


@dataclass(frozen=True)
class Cut:
    """A 200 event stream that stops after the first text piece, without its end marker."""


@dataclass(frozen=True)
class MidStreamError:
    """The provider reports an error event after the first text piece."""


@dataclass(frozen=True)
class KeepAlive:
    """A 200 event stream of keep-alive comments (and pings) every `interval`, never text."""

    interval: float = 0.1


@dataclass(frozen=True)
class Drip:
    """A 200 event stream whose answer never ends: one word every `interval`."""

    interval: float = 0.1


@dataclass(frozen=True)
class Flood:
    """A 200 event stream answering `total_bytes` of text (in 64 KB pieces), whatever was asked."""

    total_bytes: int = 200 * 1024 * 1024


@dataclass(frozen=True)
class EndlessLine:
    """A 200 event stream whose first `data:` line never ends (stops at `limit` bytes)."""

    limit: int = 1024 * 1024 * 1024


Hostile = KeepAlive | Drip | Flood | EndlessLine
Fault = Status | Hang | Malformed | Cut | MidStreamError | Hostile | None


@dataclass(frozen=True)
class Recorded:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def user_message(self) -> str:
        """The last user turn's text."""
        return str(self.body["messages"][-1]["content"])

    @property
    def system(self) -> str:
        """The system prompt, from either format."""
        if "system" in self.body:
            return str(self.body["system"])
        return str(self.body["messages"][0]["content"])


def extractive_answer(user_message: str) -> str:
    """An answer made of the first prose sentence of the first two numbered sources, cited."""
    context = user_message.split("</context>")[0]
    sources = re.findall(
        r"^\[(\d+)\] [^\n]*\n(?:(?:URL|Source): [^\n]*\n)*(.+?)(?=^\[\d+\] |\Z)",
        context,
        flags=re.M | re.S,
    )
    parts = [
        f"{sentence} [{number}]"
        for number, body in sources[:2]
        if (sentence := _first_sentence(body))
    ]
    return " ".join(parts) or "The context does not contain the answer."


def _first_sentence(markdown: str) -> str:
    """The first sentence of prose: no code, headings or tables; list markers and bold removed."""
    prose = re.sub(r"```.*?(```|\Z)", " ", markdown, flags=re.S)
    lines = [
        re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", line).replace("**", "")
        for line in prose.splitlines()
        if line.strip() and not line.lstrip().startswith(("#", "|", "<"))
    ]
    for sentence in re.split(r"(?<=[.!?])\s+", " ".join(lines)):
        if len(sentence) >= 30 and sentence[0].isupper():
            return sentence.strip()
    return ""


class LLMServer:
    """A local LLM API on 127.0.0.1 in a thread; use as a context manager."""

    def __init__(
        self,
        wire: Wire,
        *,
        answer: str | AnswerFn = extractive_answer,
        faults: Sequence[Fault] | None = None,
        api_key: str | None = None,
        port: int = 0,
    ) -> None:
        """Speak `wire`; require `api_key` when given; play `faults` one per request."""
        self.wire: Wire = wire
        self.answer = answer
        self.faults: list[Fault] = list(faults or [])
        self.api_key = api_key
        self.requests: list[Recorded] = []
        self.bytes_sent: list[int] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL a client is configured with (ANTHROPIC_BASE_URL / OPENAI_BASE_URL)."""
        host, port = self._httpd.server_address[:2]
        root = f"http://{host!s}:{port}"
        return root if self.wire == "anthropic" else f"{root}/v1"

    def __enter__(self) -> "LLMServer":
        """Start serving."""
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop serving (and release hanging handlers)."""
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def sent(self, answers: int = 1, *, wait: float = 30.0) -> list[int]:
        """`bytes_sent`, once `answers` hostile streams have ended (the client hung up)."""
        deadline = time.monotonic() + wait
        while len(self.bytes_sent) < answers and time.monotonic() < deadline:
            time.sleep(0.01)
        return list(self.bytes_sent)

    def _next_fault(self) -> Fault:
        with self._lock:
            return self.faults.pop(0) if self.faults else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                server.requests.append(Recorded(self.path, headers, body))
                server._serve(self, headers, body)

        return Handler

    # -- responses -----------------------------------------------------------------------------

    def _serve(
        self, handler: BaseHTTPRequestHandler, headers: dict[str, str], body: dict[str, Any]
    ) -> None:
        expected = "/v1/messages" if self.wire == "anthropic" else "/v1/chat/completions"
        if handler.path != expected:
            self._error(handler, Status(404, message=f"no route {handler.path}"))
            return
        if self.api_key is not None:
            if self.wire == "anthropic":
                given = headers.get("x-api-key")
            else:
                given = headers.get("authorization", "").removeprefix("Bearer ")
            if given != self.api_key:
                # Worst case of what real APIs do (they echo a masked form of the wrong key):
                # the client must scrub it from what it prints.
                message = f"invalid x-api-key: Incorrect API key provided: {given}"
                self._error(handler, Status(401, message=message))
                return
        fault = self._next_fault()
        if isinstance(fault, Status):
            self._error(handler, fault)
            return
        if isinstance(fault, Hang):
            self._stopping.wait(fault.seconds)
            return
        if isinstance(fault, KeepAlive | Drip | Flood | EndlessLine):
            self._hostile(handler, fault, str(body.get("model", "")))
            return
        answer = (
            self.answer
            if isinstance(self.answer, str)
            else self.answer(Recorded("", headers, body).user_message)
        )
        events = list(self._events(answer, str(body.get("model", ""))))
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream; charset=utf-8")
        handler.send_header("cache-control", "no-cache")
        handler.end_headers()
        if isinstance(fault, Malformed):
            events = [events[0], "data: {this is not json\n\n"]
        elif isinstance(fault, Cut):
            events = events[: self._first_text_index(events) + 1]
        elif isinstance(fault, MidStreamError):
            events = [*events[: self._first_text_index(events) + 1], self._error_event()]
        for event in events:
            handler.wfile.write(event.encode())
            handler.wfile.flush()

    def _hostile(self, handler: BaseHTTPRequestHandler, fault: Hostile, model: str) -> None:
        """Play a hostile stream until it ends or the client hangs up; count what was sent."""
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream; charset=utf-8")
        handler.end_headers()
        sent = 0
        try:
            for data in self._hostile_events(fault, model):
                handler.wfile.write(data)
                handler.wfile.flush()
                sent += len(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what a bounded client does
        finally:
            self.bytes_sent.append(sent)

    def _hostile_events(self, fault: Hostile, model: str) -> Iterator[bytes]:
        events = list(self._events("x", model))
        first = self._first_text_index(events)
        # The stream's opening events, as the real API sends them before any text.
        yield "".join(events[:first]).encode()
        if isinstance(fault, KeepAlive):
            while not self._stopping.wait(fault.interval):
                ping = 'event: ping\ndata: {"type": "ping"}\n\n' if self.wire == "anthropic" else ""
                yield (": keep-alive\n\n" + ping).encode()
        elif isinstance(fault, Drip):
            while not self._stopping.wait(fault.interval):
                yield self._piece_event("word ").encode()
        elif isinstance(fault, Flood):
            piece = self._piece_event("flood " * (64 * 1024 // 6)).encode()
            for _ in range(fault.total_bytes // len(piece) + 1):
                yield piece
            yield "".join(events[first + 1 :]).encode()
        else:
            yield b"data: "
            line = b"x" * (64 * 1024)
            for _ in range(fault.limit // len(line)):
                yield line

    def _piece_event(self, text: str) -> str:
        """One event carrying `text` as a piece of the answer, in this server's wire format."""
        if self.wire == "anthropic":
            delta = {"type": "text_delta", "text": text}
            return _sse(
                "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
            )
        choice = {"index": 0, "delta": {"content": text}, "finish_reason": None}
        return _sse(
            None, {"id": "chatcmpl-local", "object": "chat.completion.chunk", "choices": [choice]}
        )

    def _error(self, handler: BaseHTTPRequestHandler, status: Status) -> None:
        if self.wire == "anthropic":
            kinds = {401: "authentication_error", 429: "rate_limit_error", 529: "overloaded_error"}
            payload: dict[str, Any] = {
                "type": "error",
                "error": {"type": kinds.get(status.code, "api_error"), "message": status.message},
            }
        else:
            payload = {"error": {"message": status.message, "type": "error", "code": status.code}}
        data = json.dumps(payload).encode()
        handler.send_response(status.code)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        for name, value in status.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def _first_text_index(events: list[str]) -> int:
        return next(i for i, e in enumerate(events) if "text_delta" in e or '"content"' in e)

    def _error_event(self) -> str:
        if self.wire == "anthropic":
            payload = {
                "type": "error",
                "error": {"type": "overloaded_error", "message": "Overloaded"},
            }
            return f"event: error\ndata: {json.dumps(payload)}\n\n"
        return (
            f"data: {json.dumps({'error': {'message': 'Overloaded', 'type': 'server_error'}})}\n\n"
        )

    def _events(self, answer: str, model: str) -> Iterator[str]:
        pieces = re.findall(r"\S+\s*|\s+", answer) or [""]
        if self.wire == "anthropic":
            yield from _anthropic_stream(pieces, model)
        else:
            yield from _openai_stream(pieces, model)


def _sse(event: str | None, payload: dict[str, Any]) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(payload)}\n\n"


def _anthropic_stream(pieces: list[str], model: str) -> Iterator[str]:
    yield _sse(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_local",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 321, "output_tokens": 1},
            },
        },
    )
    yield _sse(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    )
    yield _sse("ping", {"type": "ping"})
    for piece in pieces:
        yield _sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": piece},
            },
        )
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": len(pieces)},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def _openai_stream(pieces: list[str], model: str) -> Iterator[str]:
    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-local",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield _sse(None, chunk({"role": "assistant", "content": ""}, None))
    for piece in pieces:
        yield _sse(None, chunk({"content": piece}, None))
    yield _sse(None, chunk({}, "stop"))
    usage = {
        "prompt_tokens": 321,
        "completion_tokens": len(pieces),
        "total_tokens": 321 + len(pieces),
    }
    yield _sse(
        None,
        {"id": "chatcmpl-local", "object": "chat.completion.chunk", "choices": [], "usage": usage},
    )
    yield "data: [DONE]\n\n"


def main() -> None:
    """Serve until interrupted (for trying `rag ask` by hand)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("wire", choices=["anthropic", "openai"])
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    with LLMServer(args.wire, port=args.port) as server:
        sys.stderr.write(f"{args.wire} wire format on {server.url} (Ctrl+C stops it)\n")
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
