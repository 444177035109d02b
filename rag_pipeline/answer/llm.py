"""LLM providers over plain HTTP: the Anthropic Messages API and OpenAI-compatible chat completions.

Both stream the answer as server-sent events (`llm_stream.py` reads them within bounds); a
provider turns either wire format into the same `TextDelta`s and one closing `StreamEnd` with
the token usage. No vendor SDK: httpx is already a dependency, and the two request shapes are
small and stable.

Failures become one `LLMError` line that says what to do. A request is retried (with backoff,
honouring `Retry-After`, `rag_pipeline.core.http_retry`) on 429, 408, 5xx/529, timeouts and
dropped connections — but only until the first piece of answer arrives: retrying later would
print part of the answer twice. A call ends at `deadline` (RAG_LLM_DEADLINE_SECONDS) whatever
the server sends.

Secrets: the API key goes into a request header and nowhere else. Whatever a server says (an
error body echoing the key, perhaps over two lines) and every message naming the endpoint is
masked (key, URL user and password) and stripped of control characters before it is cut to
length or printed.
"""

import math
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from rag_pipeline.answer.llm_stream import (
    MalformedStreamError,
    ProviderStreamError,
    StreamClock,
    StreamEnd,
    StreamEvent,
    StreamLimitError,
    StreamLimits,
    TextDelta,
    Usage,
    answer_events,
    anthropic_events,
    error_detail,
    openai_events,
    read_error_body,
    server_sent_events,
)
from rag_pipeline.core.http_retry import RetryableError, RetryPolicy, parse_retry_after, retrying
from rag_pipeline.core.redact import mask_secrets, url_secrets, url_without_credentials
from rag_pipeline.core.terminal import strip_controls
from rag_pipeline.settings import Settings

__all__ = [
    "ChatProvider",
    "LLMError",
    "ProviderConfig",
    "StreamEnd",
    "StreamEvent",
    "TextDelta",
    "Usage",
    "configuration_hint",
    "resolve_provider",
]

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
class ProviderConfig:
    """Where and how to ask one model."""

    provider: ProviderName
    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    max_tokens: int = 1024
    timeout: float = 60.0
    retries: int = 2
    deadline: float = 300.0

    @property
    def label(self) -> str:
        """How messages name this provider (never with the key or URL credentials)."""
        if self.provider == "anthropic":
            return f"Anthropic ({self.model})"
        return f"OpenAI-compatible endpoint {url_without_credentials(self.base_url)} ({self.model})"

    @property
    def key_variable(self) -> str:
        """The environment variable holding this provider's key."""
        return "ANTHROPIC_API_KEY" if self.provider == "anthropic" else "OPENAI_API_KEY"

    @property
    def model_variable(self) -> str:
        """The setting naming the model."""
        return "RAG_ANTHROPIC_MODEL" if self.provider == "anthropic" else "RAG_OPENAI_MODEL"

    @property
    def url_variable(self) -> str:
        """The setting naming the endpoint."""
        return "ANTHROPIC_BASE_URL" if self.provider == "anthropic" else "OPENAI_BASE_URL"

    @property
    def secrets(self) -> list[str]:
        """What no message may show: the key, and the user and password in the base URL."""
        return [s for s in (self.api_key, *url_secrets(self.base_url)) if s]


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
            raise LLMError(f"{config.url_variable} must start with http:// or https://")
        self.config = config
        self.limits = StreamLimits.for_tokens(config.max_tokens)
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
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            # Uncompressed: a compressed stream would be inflated unbounded below our counts.
            "accept-encoding": "identity",
        }
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
        clock = StreamClock(deadline_seconds=self.config.deadline, idle_seconds=self.config.timeout)
        body = self.request_body(system, user)
        policy = RetryPolicy(
            attempts=self.config.retries + 1,
            base_delay=_BACKOFF_BASE,
            max_delay=_MAX_RETRY_WAIT,
            jitter=False,
            give_up_on_long_retry_after=True,
        )
        opened: tuple[ExitStack, StreamEvent, Iterator[StreamEvent]] | None = None
        try:
            for attempt in retrying(
                policy,
                sleep=self._sleep,
                deadline=clock.deadline,
                before_sleep=self._notice_retry,
            ):
                with attempt:
                    opened = self._open(body, attempt.retry_state.attempt_number, clock)
        except RetryableError as exc:
            raise LLMError(str(exc)) from None
        assert opened is not None  # the loop ends with an opened stream or raises
        stack, first, rest = opened
        with stack:
            yield first
            try:
                yield from rest
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                raise LLMError(self._transport_message(exc, started=True, attempt=0)) from None

    def _open(
        self, body: dict[str, Any], attempt: int, clock: StreamClock
    ) -> tuple[ExitStack, StreamEvent, Iterator[StreamEvent]]:
        """One attempt up to the first piece of answer: the open stream and its first event.

        Raises:
            RetryableError: worth another try (the message is the final one if it is the last).
            LLMError: not worth another try.
        """
        clock.restart_idle()
        read = max(0.001, min(self.config.timeout, clock.remaining()))
        timeout = httpx.Timeout(read, connect=min(read, 10.0))
        stack = ExitStack()
        try:
            response = stack.enter_context(
                self._client.stream(
                    "POST", self.url, headers=self._headers(), json=body, timeout=timeout
                )
            )
            if response.status_code != 200:
                raise self._http_failure(response, attempt)
            events = self._events(response, clock)
            first = next(events, None)
            if first is None:
                raise LLMError(self._message("malformed stream (it ended before its first event)"))
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            stack.close()
            raise RetryableError(
                self._transport_message(exc, started=False, attempt=attempt)
            ) from None
        except BaseException:
            stack.close()
            raise
        return stack, first, events

    def _notice_retry(self, attempt: int, wait: float, problem: str) -> None:
        if self._on_retry:
            self._on_retry(f"{self.config.label} unavailable, retrying in {wait:.1f} s")

    # -- HTTP failures -----------------------------------------------------------------------

    def _http_failure(self, response: httpx.Response, attempt: int) -> Exception:
        """The exception for a non-200 answer: retryable, or final."""
        raw = read_error_body(response)
        message = self._http_message(response, raw, attempt)
        if response.status_code in _RETRY_STATUSES:
            return RetryableError(message, retry_after=_retry_after(response))
        return LLMError(message)

    def _http_message(self, response: httpx.Response, raw: bytes, attempt: int) -> str:
        status = response.status_code
        detail = self._detail(error_detail(raw))
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
            return (
                f"{label}: not found (HTTP 404){said}; check {self.config.model_variable} "
                f"and {self.config.url_variable}"
            )
        if status >= 500:
            return f"{label}: server error (HTTP {status}) after {attempt} attempt(s){said}"
        return f"{label}: request rejected (HTTP {status}){said}"

    def _transport_message(self, exc: httpx.HTTPError, *, started: bool, attempt: int) -> str:
        during = " mid-answer" if started else f" after {attempt} attempt(s)"
        if isinstance(exc, httpx.TimeoutException):
            what = (
                "connecting" if isinstance(exc, httpx.ConnectTimeout) else "waiting for the answer"
            )
            return self._message(
                f"timed out {what} ({self.config.timeout:g} s, RAG_LLM_TIMEOUT_SECONDS){during}"
            )
        reason = self._detail(str(exc)) or type(exc).__name__
        when = " while answering" if started else f" after {attempt} attempt(s)"
        return self._message(f"connection failed ({reason}){when}")

    def _message(self, problem: str) -> str:
        return f"{self.config.label}: {problem}"

    def _detail(self, text: str) -> str:
        """Server text for a message: secrets masked first, then controls removed and cut."""
        masked = mask_secrets(text, self.config.secrets)
        return " ".join(strip_controls(masked).split())[:_DETAIL_CHARS]

    # -- the two wire formats ------------------------------------------------------------------

    def _events(self, response: httpx.Response, clock: StreamClock) -> Iterator[StreamEvent]:
        content_type = response.headers.get("content-type", "")
        if "text/event-stream" not in content_type:
            raise LLMError(
                self._message(
                    "malformed stream (expected text/event-stream, got "
                    f"{self._detail(content_type) or 'no content type'})"
                )
            )
        parse = anthropic_events if self.config.provider == "anthropic" else openai_events
        try:
            sse = server_sent_events(response, self.limits, clock)
            yield from answer_events(parse(sse), self.limits, clock)
        except MalformedStreamError as exc:
            raise LLMError(self._message(f"malformed stream ({self._detail(str(exc))})")) from None
        except ProviderStreamError as exc:
            message = self._detail(str(exc))
            raise LLMError(self._message(f"the answer failed mid-stream: {message}")) from None
        except StreamLimitError as exc:
            raise LLMError(self._message(f"answer stopped: {exc}")) from None


def _retry_after(response: httpx.Response) -> float | None:
    return parse_retry_after(response.headers.get("retry-after"))


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
        "deadline": settings.llm_deadline_seconds,
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
