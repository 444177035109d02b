"""LLM providers over plain HTTP: the Anthropic Messages API and OpenAI-compatible chat completions.

Both stream the answer as server-sent events; a provider turns either wire format into the
same `TextDelta`s and one closing `StreamEnd` with the token usage. No vendor SDK: httpx is
already a dependency, and the two request shapes are small and stable.

Failures become one `LLMError` line that says what to do. A request is retried (with backoff,
honouring `Retry-After`) on 429, 408, 5xx/529, timeouts and dropped connections — but only
until the first token arrives: retrying later would print part of the answer twice. The API
key goes into a request header and nowhere else; error text from a server is scrubbed of it.
"""

import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal, cast

import httpx

from rag_pipeline.settings import Settings

ProviderName = Literal["anthropic", "openai"]

ANTHROPIC_VERSION = "2023-06-01"  # the Messages API version header every client sends
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})  # 529: Anthropic overloaded
# Longer waits are reported instead of slept through: a person at a terminal would rather know.
_MAX_RETRY_WAIT = 30.0
_BACKOFF_BASE = 1.0
_DETAIL_CHARS = 200


class LLMError(RuntimeError):
    """A provider failed; the message is one line for a person and never holds the API key."""


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


@dataclass(frozen=True)
class ProviderConfig:
    """Where and how to ask one model."""

    provider: ProviderName
    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    max_tokens: int = 1024
    timeout: float = 60.0
    retries: int = 2

    @property
    def label(self) -> str:
        """How messages name this provider (never with the key)."""
        if self.provider == "anthropic":
            return f"Anthropic ({self.model})"
        return f"OpenAI-compatible endpoint {self.base_url} ({self.model})"

    @property
    def key_variable(self) -> str:
        """The environment variable holding this provider's key."""
        return "ANTHROPIC_API_KEY" if self.provider == "anthropic" else "OPENAI_API_KEY"

    @property
    def model_variable(self) -> str:
        """The setting naming the model."""
        return "RAG_ANTHROPIC_MODEL" if self.provider == "anthropic" else "RAG_OPENAI_MODEL"


RetryNotice = Callable[[str], None]


class ChatProvider:
    """Streams one answer for a system prompt and a user message."""

    def __init__(
        self,
        config: ProviderConfig,
        *,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        on_retry: RetryNotice | None = None,
    ) -> None:
        """Use `client` (or a new one with the configured timeout); `sleep` waits between tries."""
        if not config.base_url.startswith(("http://", "https://")):
            variable = "ANTHROPIC_BASE_URL" if config.provider == "anthropic" else "OPENAI_BASE_URL"
            raise LLMError(f"{variable} must start with http:// or https://")
        self.config = config
        self._owns_client = client is None
        self._client = client or httpx.Client(
            timeout=httpx.Timeout(config.timeout, connect=min(config.timeout, 10.0))
        )
        self._sleep = sleep
        self._on_retry = on_retry

    def close(self) -> None:
        """Close the HTTP connections (of a client this provider created)."""
        if self._owns_client:
            self._client.close()

    @property
    def url(self) -> str:
        """The endpoint answers are requested from."""
        base = self.config.base_url.rstrip("/")
        if self.config.provider == "anthropic":
            return f"{base}/v1/messages"
        return f"{base}/chat/completions"

    def request_body(self, system: str, user: str) -> dict[str, Any]:
        """The JSON body of the streaming request."""
        if self.config.provider == "anthropic":
            return {
                "model": self.config.model,
                "max_tokens": self.config.max_tokens,
                "system": system,
                "messages": [{"role": "user", "content": user}],
                "stream": True,
            }
        return {
            "model": self.config.model,
            "max_tokens": self.config.max_tokens,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "stream": True,
            # Without this, OpenAI-compatible servers send no token counts when streaming.
            "stream_options": {"include_usage": True},
        }

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        key = self.config.api_key
        if self.config.provider == "anthropic":
            headers["anthropic-version"] = ANTHROPIC_VERSION
            if key:
                headers["x-api-key"] = key
        elif key:
            headers["authorization"] = f"Bearer {key}"
        return headers

    def stream(self, system: str, user: str) -> Iterator[StreamEvent]:
        """Yield the answer piece by piece, then one `StreamEnd`; raise `LLMError` on failure."""
        attempts = self.config.retries + 1
        body = self.request_body(system, user)
        for attempt in range(1, attempts + 1):
            started = False
            wait: float | None = None
            try:
                with self._client.stream(
                    "POST", self.url, headers=self._headers(), json=body
                ) as response:
                    if response.status_code != 200:
                        response.read()
                        wait = self._retry_wait(response, attempt, attempts)
                        if wait is None:
                            raise LLMError(self._http_message(response, attempt))
                    else:
                        for event in self._events(response):
                            started = True
                            yield event
                        return
            except httpx.TimeoutException as exc:
                if started or attempt == attempts:
                    raise LLMError(self._timeout_message(exc, started, attempt)) from None
                wait = self._backoff(attempt)
            except httpx.TransportError as exc:
                if started or attempt == attempts:
                    reason = _one_line(str(exc)) or type(exc).__name__
                    when = " while answering" if started else f" after {attempt} attempt(s)"
                    raise LLMError(
                        f"{self.config.label}: connection failed ({reason}){when}"
                    ) from None
                wait = self._backoff(attempt)
            if self._on_retry:
                self._on_retry(f"{self.config.label} unavailable, retrying in {wait:.1f} s")
            self._sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    # -- HTTP failures -----------------------------------------------------------------------

    def _retry_wait(self, response: httpx.Response, attempt: int, attempts: int) -> float | None:
        """Seconds to wait before the next try, or None when this failure is final."""
        if response.status_code not in _RETRY_STATUSES or attempt == attempts:
            return None
        after = _retry_after(response)
        if after is None:
            return self._backoff(attempt)
        return after if after <= _MAX_RETRY_WAIT else None

    @staticmethod
    def _backoff(attempt: int) -> float:
        return min(_BACKOFF_BASE * 2 ** (attempt - 1), _MAX_RETRY_WAIT)

    def _http_message(self, response: httpx.Response, attempt: int) -> str:
        status = response.status_code
        detail = self._scrub(_error_detail(response))
        said = f": {detail}" if detail else ""
        label = self.config.label
        if status in (401, 403):
            return (
                f"{label}: authentication failed (HTTP {status}){said}; "
                f"check {self.config.key_variable}"
            )
        if status == 429:
            after = _retry_after(response)
            when = f"; retry after {math.ceil(after)} s" if after is not None else ""
            return f"{label}: rate limited (HTTP 429) after {attempt} attempt(s){said}{when}"
        if status == 404:
            where = (
                "ANTHROPIC_BASE_URL" if self.config.provider == "anthropic" else "OPENAI_BASE_URL"
            )
            return (
                f"{label}: not found (HTTP 404){said}; check {self.config.model_variable} "
                f"and {where}"
            )
        if status >= 500:
            return f"{label}: server error (HTTP {status}) after {attempt} attempt(s){said}"
        return f"{label}: request rejected (HTTP {status}){said}"

    def _timeout_message(self, exc: httpx.TimeoutException, started: bool, attempt: int) -> str:
        what = "connecting" if isinstance(exc, httpx.ConnectTimeout) else "waiting for the answer"
        during = " mid-answer" if started else f" after {attempt} attempt(s)"
        return (
            f"{self.config.label}: timed out {what} ({self.config.timeout:g} s, "
            f"RAG_LLM_TIMEOUT_SECONDS){during}"
        )

    def _scrub(self, text: str) -> str:
        key = self.config.api_key
        return text.replace(key, "***") if key else text

    # -- the two wire formats ------------------------------------------------------------------

    def _events(self, response: httpx.Response) -> Iterator[StreamEvent]:
        content_type = response.headers.get("content-type", "")
        if "text/event-stream" not in content_type:
            raise LLMError(
                f"{self.config.label}: malformed stream (expected text/event-stream, "
                f"got {content_type or 'no content type'})"
            )
        parse = _anthropic_events if self.config.provider == "anthropic" else _openai_events
        try:
            yield from parse(_server_sent_events(response.iter_lines()))
        except _MalformedStreamError as exc:
            raise LLMError(f"{self.config.label}: malformed stream ({exc})") from None
        except _ProviderStreamError as exc:
            message = self._scrub(str(exc))
            raise LLMError(f"{self.config.label}: the answer failed mid-stream: {message}") from (
                None
            )


class _MalformedStreamError(Exception):
    pass


class _ProviderStreamError(Exception):
    pass


@dataclass(frozen=True)
class _SSE:
    event: str
    data: str


def _server_sent_events(lines: Iterator[str]) -> Iterator[_SSE]:
    """Group `event:`/`data:` lines into events (the WHATWG rules, minus ids and retry)."""
    event = ""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield _SSE(event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue  # a comment, e.g. a keep-alive
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        yield _SSE(event or "message", "\n".join(data))


def _json_object(sse: _SSE) -> dict[str, Any]:
    try:
        value = json.loads(sse.data)
    except json.JSONDecodeError:
        raise _MalformedStreamError(f"an event is not JSON: {sse.data[:60]!r}") from None
    if not isinstance(value, dict):
        raise _MalformedStreamError(f"an event is not a JSON object: {sse.data[:60]!r}")
    return value  # pyright: ignore[reportUnknownVariableType]


def _anthropic_events(events: Iterator[_SSE]) -> Iterator[StreamEvent]:
    input_tokens: int | None = None
    output_tokens: int | None = None
    stop_reason: str | None = None
    for sse in events:
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
                    raise _MalformedStreamError("a text_delta without text")
                yield TextDelta(text)
        elif kind == "message_delta":
            stop_reason = _str(_dict(payload.get("delta")).get("stop_reason")) or stop_reason
            output_tokens = _int(_dict(payload.get("usage")).get("output_tokens")) or output_tokens
        elif kind == "message_stop":
            yield StreamEnd(Usage(input_tokens, output_tokens), stop_reason)
            return
        elif kind == "error":
            error = _dict(payload.get("error"))
            raise _ProviderStreamError(
                _one_line(f"{error.get('type', 'error')}: {error.get('message', '')}")
            )
    raise _MalformedStreamError("it ended before message_stop")


def _openai_events(events: Iterator[_SSE]) -> Iterator[StreamEvent]:
    usage = Usage()
    stop_reason: str | None = None
    for sse in events:
        if sse.data.strip() == "[DONE]":
            yield StreamEnd(usage, stop_reason)
            return
        payload = _json_object(sse)
        if "error" in payload:
            error: Any = payload["error"]
            message: Any = _dict(error).get("message", error)
            raise _ProviderStreamError(_one_line(str(message)))
        choices: Any = payload.get("choices")
        if not isinstance(choices, list):
            raise _MalformedStreamError("a chunk without choices")
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
        raise _MalformedStreamError("it ended before [DONE]")
    yield StreamEnd(usage, stop_reason)


def _dict(value: Any) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _dicts(values: Any) -> list[dict[str, Any]]:
    return [_dict(v) for v in cast(list[Any], values)]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _one_line(text: str) -> str:
    return " ".join(text.split())[:_DETAIL_CHARS]


def _error_detail(response: httpx.Response) -> str:
    """The server's own explanation, from either API's error JSON (or its plain text)."""
    try:
        payload = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _one_line(response.text)
    body = _dict(payload)
    error: Any = body.get("error")
    if isinstance(error, str):
        return _one_line(error)
    message: Any = _dict(error).get("message") or body.get("message")
    return _one_line(message) if isinstance(message, str) else ""


def _retry_after(response: httpx.Response) -> float | None:
    """`Retry-After` in seconds: a number of seconds or an HTTP date (RFC 9110)."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - datetime.now(UTC)).total_seconds())


def resolve_provider(
    settings: Settings, *, provider: str | None = None, model: str | None = None
) -> ProviderConfig | None:
    """The configured provider (`provider` overrides RAG_LLM_PROVIDER), or None if none is.

    auto: Anthropic when ANTHROPIC_API_KEY is set, else an OpenAI-compatible endpoint when
    OPENAI_BASE_URL or OPENAI_API_KEY is set.
    """
    choice = provider or settings.llm_provider
    anthropic_key = (
        settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None
    )
    openai_key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    common: dict[str, Any] = {
        "max_tokens": settings.llm_max_answer_tokens,
        "timeout": settings.llm_timeout_seconds,
        "retries": settings.llm_retries,
    }
    if choice in ("anthropic", "auto") and anthropic_key:
        return ProviderConfig(
            provider="anthropic",
            base_url=settings.anthropic_base_url,
            model=model or settings.anthropic_model,
            api_key=anthropic_key,
            **common,
        )
    if choice in ("openai", "auto") and (settings.openai_base_url or openai_key):
        return ProviderConfig(
            provider="openai",
            base_url=settings.openai_base_url or OPENAI_DEFAULT_BASE_URL,
            model=model or settings.openai_model,
            api_key=openai_key,
            **common,
        )
    return None


def configuration_hint(provider: str | None = None) -> str:
    """How to configure an LLM (for a person who has none)."""
    anthropic = "export ANTHROPIC_API_KEY=… (model: RAG_ANTHROPIC_MODEL)"
    openai = (
        "export OPENAI_BASE_URL=http://localhost:11434/v1 RAG_OPENAI_MODEL=llama3.1 "
        "(any OpenAI-compatible server, e.g. Ollama or vLLM; OPENAI_API_KEY if it needs one)"
    )
    if provider == "anthropic":
        return f"No Anthropic key is configured. To answer with Claude: {anthropic}"
    if provider == "openai":
        return f"No OpenAI-compatible endpoint is configured. To use one: {openai}"
    return f"No LLM is configured. For Claude: {anthropic}. Or for a local model: {openai}."
