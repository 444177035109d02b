"""The answer half of `rag ask` without a database: the numbered context and its token budget,
citation parsing, and both providers against local servers speaking the real wire formats
(streaming, 401, 429 + Retry-After, 5xx, timeout, malformed and cut streams)."""

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

import rag_pipeline
from rag_pipeline.answer.ask import Answer, Answerer, cited_numbers
from rag_pipeline.answer.context import SYSTEM_PROMPT, build_context
from rag_pipeline.answer.llm import (
    ChatProvider,
    LLMError,
    ProviderConfig,
    StreamEnd,
    StreamEvent,
    TextDelta,
)
from rag_pipeline.search import SearchHit
from rag_pipeline_tests.llm_servers import (
    Cut,
    Fault,
    Hang,
    LLMServer,
    Malformed,
    MidStreamError,
    Status,
    Wire,
)

DEMO = Path(rag_pipeline.__file__).parent / "demo" / "files"
KEY = "sk-test-0123456789-secret"
WIRES: list[Wire] = ["anthropic", "openai"]


def _hit(n: int, text: str, *, title: str = "", section: str = "") -> SearchHit:
    return SearchHit(
        source_type="files",
        source_id=f"demo/doc{n}.md",
        language="en_US",
        title=title or f"Document {n}",
        breadcrumb=f"Guides › Part {n}",
        section_title=section or f"Section {n}",
        heading_path=[title or f"Document {n}", section or f"Section {n}"],
        url=f"https://example.org/doc{n}",
        score=1.0 / n,
        text=text[:200],
        parent_text=text,
        document_id=f"d{n}",
        section_id=f"s{n}",
        chunk_id=f"c{n}",
    )


def _demo_hits() -> list[SearchHit]:
    names = ["warehouse-and-locators.md", "business-partner-setup.md", "developing-a-plugin.md"]
    return [
        _hit(n, (DEMO / name).read_text(encoding="utf-8").split("---", 2)[2].strip())
        for n, name in enumerate(names, 1)
    ]


def test_context_numbers_sections_with_title_breadcrumb_and_url(
    count_tokens: Callable[[str], int],
) -> None:
    hits = [_hit(1, "Open the Warehouse window."), _hit(2, "Create a locator.")]
    context = build_context(hits, budget=1000, count_tokens=count_tokens)
    assert [s.n for s in context.sources] == [1, 2]
    assert context.text.startswith("[1] Document 1 › Guides › Part 1 › Section 1\n")
    assert "URL: https://example.org/doc1" in context.text
    assert "[2] Document 2 › Guides › Part 2 › Section 2" in context.text
    assert "Open the Warehouse window." in context.text
    assert "Create a locator." in context.text
    assert context.system == SYSTEM_PROMPT
    assert "only from the numbered sources" in SYSTEM_PROMPT
    assert "does not contain the answer" in SYSTEM_PROMPT
    assert "language of the question" in SYSTEM_PROMPT
    message = context.user_message("How?")
    assert message.startswith("<context>\n[1] ")
    assert message.endswith("</context>\n\nQuestion: How?")


@pytest.mark.parametrize("budget", [200, 450, 900, 2500])
def test_context_stays_within_the_token_budget(
    count_tokens: Callable[[str], int], budget: int
) -> None:
    hits = _demo_hits()
    context = build_context(hits, budget=budget, count_tokens=count_tokens)
    assert context.sources, "the best section always gets in, cut if need be"
    assert count_tokens(context.text) <= budget
    assert context.tokens == count_tokens(context.text)
    for source, hit in zip(context.sources, hits, strict=False):
        if source.truncated:
            assert source.text.endswith("[…]")
            assert hit.parent_text.startswith(source.text.removesuffix("\n[…]").rstrip(" […]"))
        else:
            assert source.text == hit.parent_text
    # Only the last included section may be cut; the ones before it are whole.
    assert not any(s.truncated for s in context.sources[:-1])


def test_context_cuts_one_long_paragraph_at_words(count_tokens: Callable[[str], int]) -> None:
    paragraph = " ".join(f"word{i}" for i in range(2000))
    context = build_context([_hit(1, paragraph)], budget=300, count_tokens=count_tokens)
    (source,) = context.sources
    assert source.truncated
    assert count_tokens(context.text) <= 300
    assert paragraph.startswith(source.text.removesuffix(" […]").removesuffix("\n[…]"))


def test_context_with_no_hits_is_empty(count_tokens: Callable[[str], int]) -> None:
    context = build_context([], budget=500, count_tokens=count_tokens)
    assert context.sources == ()
    assert context.text == ""
    assert context.tokens == 0


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Use the Warehouse window [1]. Locators follow [3][2].", [1, 3, 2]),
        ("Both apply [1, 2]; see also [2;3] and [1-3].", [1, 2, 3]),
        ("Numbers out of range [7] and years [2024] are not sources [0].", []),
        ("The context does not contain the answer.", []),
        ("A link [1](https://x) still cites 1, ranges [2–3] too.", [1, 2, 3]),
    ],
)
def test_cited_numbers(answer: str, expected: list[int]) -> None:
    assert cited_numbers(answer, available=3) == expected


def _provider(
    server: LLMServer, sleeps: list[float] | None = None, *, timeout: float = 60.0, retries: int = 2
) -> ChatProvider:
    config = ProviderConfig(
        provider=server.wire,
        base_url=server.url,
        model="test-model",
        api_key=KEY,
        timeout=timeout,
        retries=retries,
    )
    return ChatProvider(config, sleep=(sleeps.append if sleeps is not None else lambda _: None))


def _collect(provider: ChatProvider) -> tuple[str, list[StreamEvent]]:
    events = list(provider.stream("system text", "user text"))
    return "".join(e.text for e in events if isinstance(e, TextDelta)), events


@pytest.mark.parametrize("wire", WIRES)
def test_streams_the_answer_piece_by_piece(wire: Wire) -> None:
    answer = "Open Warehouse & Locators [1]. Then add a locator [2]."
    with LLMServer(wire, answer=answer, api_key=KEY) as server:
        text, events = _collect(_provider(server))
    assert text == answer
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 3  # streamed, not one block
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.usage.input_tokens == 321
    assert end.usage.output_tokens == len(deltas)
    (request,) = server.requests
    assert request.body["stream"] is True
    assert request.body["model"] == "test-model"
    assert request.system == "system text"
    assert request.user_message == "user text"
    if wire == "anthropic":
        assert request.path == "/v1/messages"
        assert request.headers["x-api-key"] == KEY
        assert request.headers["anthropic-version"] == "2023-06-01"
    else:
        assert request.path == "/v1/chat/completions"
        assert request.headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("wire", WIRES)
def test_wrong_key_is_one_line_naming_the_variable_without_the_key(wire: Wire) -> None:
    with LLMServer(wire, api_key="the-right-key") as server, pytest.raises(LLMError) as error:
        _collect(_provider(server))
    message = str(error.value)
    assert "\n" not in message
    assert "authentication failed (HTTP 401)" in message
    variable = "ANTHROPIC_API_KEY" if wire == "anthropic" else "OPENAI_API_KEY"
    assert f"check {variable}" in message
    # The server echoed the wrong key back; it is scrubbed.
    assert KEY not in message
    assert "***" in message
    assert len(server.requests) == 1, "a 401 is not retried"


@pytest.mark.parametrize("wire", WIRES)
def test_429_waits_as_retry_after_says_then_answers(wire: Wire) -> None:
    sleeps: list[float] = []
    faults = [Status(429, {"retry-after": "2"})]
    with LLMServer(wire, answer="Fine [1].", faults=faults) as server:
        text, _ = _collect(_provider(server, sleeps))
    assert text == "Fine [1]."
    assert sleeps == [2.0]
    assert len(server.requests) == 2


@pytest.mark.parametrize("wire", WIRES)
def test_429_until_retries_run_out_says_when_to_retry(wire: Wire) -> None:
    sleeps: list[float] = []
    faults = [Status(429, {"retry-after": "3"})] * 3
    with LLMServer(wire, faults=faults) as server, pytest.raises(LLMError) as error:
        _collect(_provider(server, sleeps, retries=2))
    assert "rate limited (HTTP 429) after 3 attempt(s)" in str(error.value)
    assert "retry after 3 s" in str(error.value)
    assert sleeps == [3.0, 3.0]


@pytest.mark.parametrize("wire", WIRES)
def test_a_long_retry_after_is_reported_not_slept_through(wire: Wire) -> None:
    sleeps: list[float] = []
    server = LLMServer(wire, faults=[Status(429, {"retry-after": "120"})])
    with server, pytest.raises(LLMError) as error:
        _collect(_provider(server, sleeps))
    assert "retry after 120 s" in str(error.value)
    assert sleeps == []
    assert len(server.requests) == 1


@pytest.mark.parametrize("wire", WIRES)
def test_server_errors_are_retried_with_backoff(wire: Wire) -> None:
    sleeps: list[float] = []
    with LLMServer(wire, answer="Recovered.", faults=[Status(500), Status(503)]) as server:
        text, _ = _collect(_provider(server, sleeps))
    assert text == "Recovered."
    assert sleeps == [1.0, 2.0]
    assert len(server.requests) == 3


@pytest.mark.parametrize("wire", WIRES)
def test_persistent_503_is_one_line(wire: Wire) -> None:
    server = LLMServer(wire, faults=[Status(503, message="down for maintenance")] * 3)
    with server, pytest.raises(LLMError) as error:
        _collect(_provider(server))
    message = str(error.value)
    assert "server error (HTTP 503) after 3 attempt(s): down for maintenance" in message
    assert "\n" not in message


@pytest.mark.parametrize("wire", WIRES)
def test_timeout_is_one_line_naming_the_setting(wire: Wire) -> None:
    with LLMServer(wire, faults=[Hang(), Hang()]) as server, pytest.raises(LLMError) as error:
        _collect(_provider(server, timeout=0.3, retries=1))
    message = str(error.value)
    assert "timed out waiting for the answer" in message
    assert "RAG_LLM_TIMEOUT_SECONDS" in message
    assert "after 2 attempt(s)" in message
    assert len(server.requests) == 2


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (Malformed(), "malformed stream (an event is not JSON"),
        (Cut(), "malformed stream (it ended before"),
        (MidStreamError(), "the answer failed mid-stream"),
    ],
)
def test_broken_streams_are_one_line_and_not_retried(wire: Wire, fault: Fault, says: str) -> None:
    with LLMServer(wire, faults=[fault]) as server, pytest.raises(LLMError) as error:
        _collect(_provider(server))
    assert says in str(error.value)
    assert "\n" not in str(error.value)
    assert len(server.requests) == 1


def test_connection_refused_is_retried_then_one_line() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleeps: list[float] = []
    config = ProviderConfig(provider="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m")
    with pytest.raises(LLMError) as error:
        list(ChatProvider(config, sleep=sleeps.append).stream("s", "u"))
    assert "connection failed" in str(error.value)
    assert sleeps == [1.0, 2.0]


def test_a_base_url_without_scheme_is_refused() -> None:
    config = ProviderConfig(provider="openai", base_url="localhost:11434/v1", model="m")
    with pytest.raises(LLMError, match="OPENAI_BASE_URL must start with http"):
        ChatProvider(config)


@pytest.mark.parametrize("wire", WIRES)
def test_answerer_maps_citations_to_the_sources_sent(
    wire: Wire, count_tokens: Callable[[str], int]
) -> None:
    context = build_context(_demo_hits(), budget=3000, count_tokens=count_tokens)
    answer = "Locators hold stock [1]. Partners are customers [2]. Again [1]."
    with LLMServer(wire, answer=answer) as server:
        items = list(Answerer(_provider(server)).stream("q?", context))
    final = items[-1]
    assert isinstance(final, Answer)
    assert "".join(i for i in items if isinstance(i, str)) == answer
    assert [c.n for c in final.citations] == [1, 2]
    assert final.citations[0].url == "https://example.org/doc1"
    assert final.citations[1].source_id == "demo/doc2.md"
    assert final.usage.input_tokens == 321
