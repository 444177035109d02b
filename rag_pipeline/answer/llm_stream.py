"""Reading an LLM's streamed answer within bounds, for both wire formats.

The body is server-sent events, parsed by httpx-sse. Below the parser, the raw bytes are
counted as they arrive: past `StreamLimits.stream_bytes` in all, or a line longer than
`line_bytes`, reading stops (an endless line would otherwise be held whole by the parser). A
`StreamClock` ends the call at its deadline and when no answer text came for `idle_seconds`:
keep-alive comments and pings are bytes, not progress, so they extend neither.

Above the parser, the events of the Anthropic Messages and OpenAI chat-completions formats
become `TextDelta`s and one `StreamEnd`; the answer's bytes are counted against
`answer_bytes`, and escape sequences and control characters are removed before any text
leaves (`rag_pipeline.core.terminal`): the answer is printed on a terminal.
"""

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import httpx
from httpx_sse import EventSource, ServerSentEvent

from rag_pipeline.core.terminal import ControlFilter

# A token is a few bytes of text; the longest ones (runs of spaces or symbols) stay below this.
ANSWER_BYTES_PER_TOKEN = 64
# Each answer piece arrives in an event of a few hundred bytes (ids, model, JSON keys).
STREAM_BYTES_PER_ANSWER_BYTE = 16
STREAM_OVERHEAD_BYTES = 1024 * 1024
# JSON may escape every character of a piece as \uXXXX: six bytes for one.
LINE_BYTES_PER_ANSWER_BYTE = 6
LINE_OVERHEAD_BYTES = 64 * 1024
# An error body is read this far: enough for any API's error JSON, not a flood.
ERROR_BODY_BYTES = 16 * 1024


@dataclass(frozen=True)
class Usage:
    """Tokens the provider counted for one answer (None when it did not say)."""

    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(frozen=True)
class TextDelta:
    """The next piece of the answer."""

    text: str


@dataclass(frozen=True)
class StreamEnd:
    """The answer is complete."""

    usage: Usage
    stop_reason: str | None


StreamEvent = TextDelta | StreamEnd


class MalformedStreamError(Exception):
    """The stream does not follow the wire format."""


class ProviderStreamError(Exception):
    """The provider reported an error inside the stream."""


class StreamLimitError(Exception):
    """The stream broke a limit; the message names it and the setting behind it."""


@dataclass(frozen=True)
class StreamLimits:
    """How much one answer may send.

    Attributes:
        answer_bytes: bytes of answer text (UTF-8).
        stream_bytes: bytes of the whole event stream, keep-alives and JSON included.
        line_bytes: bytes of one line of the stream.
    """

    answer_bytes: int
    stream_bytes: int
    line_bytes: int

    @classmethod
    def for_tokens(cls, max_tokens: int) -> "StreamLimits":
        """Limits proportional to the answer's token budget (`max_tokens`)."""
        answer = max_tokens * ANSWER_BYTES_PER_TOKEN
        stream = answer * STREAM_BYTES_PER_ANSWER_BYTE + STREAM_OVERHEAD_BYTES
        line = min(answer * LINE_BYTES_PER_ANSWER_BYTE + LINE_OVERHEAD_BYTES, stream)
        return cls(answer_bytes=answer, stream_bytes=stream, line_bytes=line)


class StreamClock:
    """The time limits of one call: an absolute deadline, and the longest wait for text."""

    def __init__(
        self,
        *,
        deadline_seconds: float,
        idle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Start the clock now."""
        self._clock = clock
        self.deadline_seconds = deadline_seconds
        self.idle_seconds = idle_seconds
        self.deadline = clock() + deadline_seconds
        self._last_text = clock()

    def remaining(self) -> float:
        """Seconds left before the deadline (never below zero)."""
        return max(0.0, self.deadline - self._clock())

    def restart_idle(self) -> None:
        """A new attempt starts: the wait for its first text starts now."""
        self._last_text = self._clock()

    def progressed(self) -> None:
        """Answer text arrived."""
        self._last_text = self._clock()

    def check(self) -> None:
        """Raise `StreamLimitError` when the deadline passed or text is overdue."""
        now = self._clock()
        if now > self.deadline:
            raise StreamLimitError(
                f"no complete answer within {self.deadline_seconds:g} s (RAG_LLM_DEADLINE_SECONDS)"
            )
        if now - self._last_text > self.idle_seconds:
            raise StreamLimitError(
                f"no answer text for {self.idle_seconds:g} s, only keep-alives "
                "(RAG_LLM_TIMEOUT_SECONDS)"
            )


class _BoundedBody(httpx.SyncByteStream):
    """The raw body of `response`, stopped at the stream and line limits and the clock."""

    def __init__(self, response: httpx.Response, limits: StreamLimits, clock: StreamClock):
        self._response = response
        self._limits = limits
        self._clock = clock

    def __iter__(self) -> Iterator[bytes]:
        total = 0
        line = 0
        for chunk in self._response.iter_raw():
            total += len(chunk)
            if total > self._limits.stream_bytes:
                raise StreamLimitError(
                    f"the stream exceeded {self._limits.stream_bytes:,} bytes "
                    "(in proportion to RAG_LLM_MAX_ANSWER_TOKENS)"
                )
            line, longest = _line_lengths(line, chunk)
            if longest > self._limits.line_bytes:
                raise StreamLimitError(
                    f"a line of the stream exceeded {self._limits.line_bytes:,} bytes "
                    "(in proportion to RAG_LLM_MAX_ANSWER_TOKENS)"
                )
            self._clock.check()
            yield chunk


_BREAK = re.compile(rb"[\r\n]")


def _line_lengths(carry: int, chunk: bytes) -> tuple[int, int]:
    """(length of the unfinished last line, longest line seen) after `chunk`."""
    lines = [len(line) for line in _BREAK.split(chunk)]
    lines[0] += carry
    return lines[-1], max(lines)


def server_sent_events(
    response: httpx.Response, limits: StreamLimits, clock: StreamClock
) -> Iterator[ServerSentEvent]:
    """The events of a `text/event-stream` response, read within `limits` and `clock`.

    Raises:
        MalformedStreamError: the response is compressed (identity was asked for).
        StreamLimitError: a limit was broken.
    """
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise MalformedStreamError(f"the stream is compressed ({encoding[:20]}), not identity")
    bounded = httpx.Response(
        response.status_code,
        headers={"content-type": response.headers.get("content-type", "")},
        stream=_BoundedBody(response, limits, clock),
    )
    yield from EventSource(bounded).iter_sse()


def answer_events(
    events: Iterator[StreamEvent], limits: StreamLimits, clock: StreamClock
) -> Iterator[StreamEvent]:
    """`events` with the answer counted against `limits` and its text made terminal-safe."""
    answer_bytes = 0
    printable = ControlFilter()
    for event in events:
        if isinstance(event, StreamEnd):
            rest = printable.flush()
            if rest:
                yield TextDelta(rest)
            yield event
            return
        if not event.text:
            continue
        clock.progressed()
        answer_bytes += len(event.text.encode("utf-8", "surrogatepass"))
        if answer_bytes > limits.answer_bytes:
            raise StreamLimitError(
                f"the answer exceeded {limits.answer_bytes:,} bytes "
                f"({ANSWER_BYTES_PER_TOKEN} per token of RAG_LLM_MAX_ANSWER_TOKENS)"
            )
        text = printable.feed(event.text)
        if text:
            yield TextDelta(text)


def read_error_body(response: httpx.Response, limit: int = ERROR_BODY_BYTES) -> bytes:
    """Up to `limit` bytes of a streamed body (an error page can be a flood, too)."""
    data = bytearray()
    try:
        for chunk in response.iter_raw():
            data += chunk[: limit - len(data)]
            if len(data) >= limit:
                break
    except httpx.HTTPError:
        pass  # what arrived is still the best explanation there is
    return bytes(data)


def error_detail(raw: bytes) -> str:
    """The server's own explanation, from either API's error JSON (or its plain text)."""
    text = raw.decode("utf-8", "replace")
    try:
        payload: Any = json.loads(text)
    except json.JSONDecodeError:
        return text
    body = _dict(payload)
    error: Any = body.get("error")
    if isinstance(error, str):
        return error
    message: Any = _dict(error).get("message") or body.get("message")
    return message if isinstance(message, str) else ""


def _json_object(sse: ServerSentEvent) -> dict[str, Any]:
    try:
        value = json.loads(sse.data)
    except json.JSONDecodeError:
        raise MalformedStreamError(f"an event is not JSON: {sse.data[:60]!r}") from None
    if not isinstance(value, dict):
        raise MalformedStreamError(f"an event is not a JSON object: {sse.data[:60]!r}")
    return value  # pyright: ignore[reportUnknownVariableType]


def anthropic_events(events: Iterator[ServerSentEvent]) -> Iterator[StreamEvent]:
    """The Messages API's events as answer pieces and the end with its usage."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    stop_reason: str | None = None
    for sse in events:
        if not sse.data:
            continue
        payload = _json_object(sse)
        kind = payload.get("type", sse.event)
        if kind == "message_start":
            usage = _dict(_dict(payload.get("message")).get("usage"))
            input_tokens = _int(usage.get("input_tokens"))
            output_tokens = _int(usage.get("output_tokens"))
        elif kind == "content_block_delta":
            delta = _dict(payload.get("delta"))
            # Other deltas (thinking, tool input, signatures) are not part of the answer text.
            if delta.get("type") == "text_delta":
                text = delta.get("text")
                if not isinstance(text, str):
                    raise MalformedStreamError("a text_delta without text")
                yield TextDelta(text)
        elif kind == "message_delta":
            stop_reason = _str(_dict(payload.get("delta")).get("stop_reason")) or stop_reason
            output_tokens = _int(_dict(payload.get("usage")).get("output_tokens")) or output_tokens
        elif kind == "message_stop":
            yield StreamEnd(Usage(input_tokens, output_tokens), stop_reason)
            return
        elif kind == "error":
            error = _dict(payload.get("error"))
            raise ProviderStreamError(f"{error.get('type', 'error')}: {error.get('message', '')}")
    raise MalformedStreamError("it ended before message_stop")


def openai_events(events: Iterator[ServerSentEvent]) -> Iterator[StreamEvent]:
    """Chat-completion chunks as answer pieces and the end with its usage."""
    usage = Usage()
    stop_reason: str | None = None
    for sse in events:
        if not sse.data:
            continue
        if sse.data.strip() == "[DONE]":
            yield StreamEnd(usage, stop_reason)
            return
        payload = _json_object(sse)
        if "error" in payload:
            error: Any = payload["error"]
            message: Any = _dict(error).get("message", error)
            raise ProviderStreamError(str(message))
        choices: Any = payload.get("choices")
        if not isinstance(choices, list):
            raise MalformedStreamError("a chunk without choices")
        for choice in _dicts(choices):
            content = _dict(choice.get("delta")).get("content")
            if isinstance(content, str) and content:
                yield TextDelta(content)
            stop_reason = _str(choice.get("finish_reason")) or stop_reason
        counted = _dict(payload.get("usage"))
        if counted:
            usage = Usage(
                _int(counted.get("prompt_tokens")), _int(counted.get("completion_tokens"))
            )
    # Some servers close without [DONE]; a finish reason still marks a complete answer.
    if stop_reason is None:
        raise MalformedStreamError("it ended before [DONE]")
    yield StreamEnd(usage, stop_reason)


def _dict(value: Any) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _dicts(values: Any) -> list[dict[str, Any]]:
    return [_dict(v) for v in cast(list[Any], values)]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None
