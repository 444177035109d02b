"""`rag ask` end to end: the demo corpus in real PostgreSQL, the real model, and a local server
speaking the Anthropic or OpenAI wire format in place of the LLM."""

import json
import re
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from rag_pipeline.answer.context import SYSTEM_PROMPT
from rag_pipeline.cli import main
from rag_pipeline.search import Searcher
from rag_pipeline.settings import load_settings
from rag_pipeline_tests.ask_support import demo_index
from rag_pipeline_tests.llm_servers import LLMServer, Status, Wire

pytestmark = pytest.mark.integration

QUESTION = "How do I set up locators in a warehouse?"
KEY = "sk-ask-test-9f8e7d6c5b4a-secret"
_LLM_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "RAG_LLM_PROVIDER",
    "RAG_LLM_CONTEXT_TOKENS",
)


@pytest.fixture(scope="module")
def demo_env(pg_admin_uri: str, rag_home: Path) -> Iterator[dict[str, str]]:
    """The demo corpus, ingested once for this module."""
    with demo_index(pg_admin_uri, rag_home) as env:
        yield env


@pytest.fixture
def ask_env(monkeypatch: pytest.MonkeyPatch, demo_env: dict[str, str]) -> None:
    """The demo index and no LLM configured, whatever the developer's shell exports."""
    for variable, value in demo_env.items():
        monkeypatch.setenv(variable, value)
    for variable in _LLM_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("RAG_LLM_RETRIES", "0")


def _use(monkeypatch: pytest.MonkeyPatch, server: LLMServer, key: str | None = KEY) -> None:
    prefix = "ANTHROPIC" if server.wire == "anthropic" else "OPENAI"
    monkeypatch.setenv(f"{prefix}_BASE_URL", server.url)
    if key:
        monkeypatch.setenv(f"{prefix}_API_KEY", key)


def _ask(*args: str) -> Result:
    return CliRunner().invoke(main, ["ask", *args], catch_exceptions=False)


def _context_of(message: str) -> str:
    return message.split("<context>\n", 1)[1].split("\n</context>", 1)[0]


@pytest.mark.usefixtures("ask_env")
@pytest.mark.parametrize("wire", ["anthropic", "openai"])
def test_ask_streams_the_answer_then_the_sources_it_cites(
    monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    with LLMServer(wire, api_key=KEY) as server:
        _use(monkeypatch, server)
        result = _ask(QUESTION)
    assert result.exit_code == 0, result.output
    (request,) = server.requests
    cited = sorted(set(map(int, re.findall(r"\[(\d+)\]", result.stdout.split("\nSources:")[0]))))
    assert cited, result.stdout
    answer, sources = result.stdout.split("\nSources:\n")
    # The canned answer quotes the first sources the request carried, and cites them.
    assert "warehouse" in answer.lower()
    listed = re.findall(r"^\[(\d+)\] (.+)$", sources, flags=re.M)
    assert [int(n) for n, _ in listed] == cited
    assert all(title.startswith("Setting up Warehouses and Locators") for _, title in listed)
    # Sources sent but not cited are not listed.
    sent = re.findall(r"^\[(\d+)\] ", _context_of(request.user_message), flags=re.M)
    assert len(sent) > len(listed)
    assert request.system == SYSTEM_PROMPT
    assert KEY not in result.output


@pytest.mark.usefixtures("ask_env")
@pytest.mark.parametrize("budget", [400, 1500])
def test_the_request_holds_the_retrieved_sections_within_the_budget(
    monkeypatch: pytest.MonkeyPatch, count_tokens: Callable[[str], int], budget: int
) -> None:
    monkeypatch.setenv("RAG_LLM_CONTEXT_TOKENS", str(budget))
    with LLMServer("openai") as server:
        _use(monkeypatch, server, key=None)
        result = _ask(QUESTION, "--lang", "en")
    assert result.exit_code == 0, result.output
    (request,) = server.requests
    context = _context_of(request.user_message)
    assert count_tokens(context) <= budget
    # ask takes a page's two best sections before the next page's
    hits = Searcher(load_settings()).search(
        QUESTION, top_k=8, languages=["en"], sections_per_document=2
    )
    blocks = re.split(r"\n\n(?=\[\d+\] )", context)
    assert blocks[0].startswith(f"[1] {hits[0].title}")
    for n, (block, hit) in enumerate(zip(blocks, hits, strict=False), 1):
        assert block.startswith(f"[{n}] {hit.title}")
        body = block.split(f"Source: {hit.source_type} {hit.source_id} ({hit.language})\n", 1)[1]
        if body.endswith("[…]"):  # the last section, cut to fit
            assert n == len(blocks)
            assert hit.parent_text.startswith(body.removesuffix("\n[…]"))
        else:
            assert body == hit.parent_text.strip()
    assert request.user_message.endswith(f"Question: {QUESTION}")


@pytest.mark.usefixtures("ask_env")
def test_ask_json_gives_answer_citations_and_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    with LLMServer("anthropic", api_key=KEY) as server:
        _use(monkeypatch, server)
        result = _ask(QUESTION, "--json", "--model", "claude-test")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert set(payload) == {"answer", "citations", "usage"}
    assert "[1]" in payload["answer"]
    assert payload["citations"][0] == {
        "n": 1,
        "title": "Setting up Warehouses and Locators",
        "url": payload["citations"][0]["url"],
        "source_type": "files",
        "source_id": "demo/warehouse-and-locators.md",
    }
    assert payload["usage"]["input_tokens"] == 321
    assert payload["usage"]["model"] == "claude-test"
    assert server.requests[0].body["model"] == "claude-test"


@pytest.mark.usefixtures("ask_env")
def test_without_an_llm_ask_prints_the_context_and_how_to_configure_one() -> None:
    result = _ask(QUESTION)
    assert result.exit_code == 0, result.output
    assert "[1] Setting up Warehouses and Locators" in result.stdout
    assert SYSTEM_PROMPT.splitlines()[0] in result.stdout
    assert "No LLM is configured" in result.stderr
    assert "ANTHROPIC_API_KEY" in result.stderr
    assert "OPENAI_BASE_URL" in result.stderr


@pytest.mark.usefixtures("ask_env")
def test_provider_errors_are_one_line_without_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with LLMServer("openai", api_key="the-right-key") as server:
        _use(monkeypatch, server, key=KEY)
        result = _ask(QUESTION)
    assert result.exit_code == 1
    assert result.stdout == ""
    # The endpoint (not OpenAI's own) is named first, then the error in one line.
    notice, *lines = result.stderr.strip().splitlines()
    assert notice.startswith(f"asking {server.url} (OPENAI_BASE_URL in the environment)")
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: OpenAI-compatible endpoint")
    assert "authentication failed (HTTP 401)" in lines[0]
    assert "OPENAI_API_KEY" in lines[0]
    assert KEY not in result.output
    assert "Traceback" not in result.output


@pytest.mark.usefixtures("ask_env")
def test_escape_sequences_in_the_answer_never_reach_the_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 38, item 8: OSC 52 (clipboard), OSC 0 (title) and clear-screen reached the terminal.
    answer = "Use\x1b]52;c;cHduZWQ=\x07 the \x1b]0;owned\x07Warehouse\x1b[2J\x1b[H window [1]."
    with LLMServer("openai", answer=answer) as server:
        _use(monkeypatch, server, key=None)
        result = _ask(QUESTION)
        json_result = _ask(QUESTION, "--json")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Use the Warehouse window [1].\n")
    assert json.loads(json_result.stdout)["answer"] == "Use the Warehouse window [1]."
    for output in (result.output, json_result.output):
        assert not any(c in output for c in "\x1b\x07\x9b\x9d")


@pytest.mark.usefixtures("ask_env")
def test_direction_controls_in_the_answer_never_reach_the_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 49, item 13: U+202E made printed text read otherwise than it was.
    answer = "Use the \u202eswodniW\u202c Ware\u2066house\u2069\u200f window\u061c [1]."
    with LLMServer("openai", answer=answer) as server:
        _use(monkeypatch, server, key=None)
        result = _ask(QUESTION)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Use the swodniW Warehouse window [1].\n")
    bidi = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    assert not any(c in result.output for c in bidi)


@pytest.mark.usefixtures("ask_env")
def test_a_base_url_from_dotenv_is_named_before_the_key_is_sent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Issue 49, item 4: a .env of the current folder sent the key elsewhere, silently.
    with LLMServer("anthropic", api_key=KEY) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        dotenv = tmp_path / ".env"
        dotenv.write_text(f"ANTHROPIC_BASE_URL={server.url}\n")
        dotenv.chmod(0o600)
        monkeypatch.chdir(tmp_path)
        result = _ask(QUESTION)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        from_environment = _ask(QUESTION)
    assert result.exit_code == 0, result.output
    assert len(server.requests) == 2
    assert f"asking {server.url} (ANTHROPIC_BASE_URL from {dotenv})" in result.stderr
    assert "with ANTHROPIC_API_KEY" in result.stderr
    assert "ANTHROPIC_BASE_URL in the environment" in from_environment.stderr
    assert KEY not in result.output


@pytest.mark.usefixtures("ask_env")
def test_a_rate_limit_is_retried_after_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_LLM_RETRIES", "1")
    faults = [Status(429, {"retry-after": "0"})]
    with LLMServer("anthropic", faults=faults, api_key=KEY) as server:
        _use(monkeypatch, server)
        result = _ask(QUESTION)
    assert result.exit_code == 0, result.output
    assert len(server.requests) == 2
    assert "retrying in 0.0 s" in result.stderr
    assert "Sources:" in result.stdout


@pytest.mark.usefixtures("ask_env")
def test_filters_reach_retrieval(monkeypatch: pytest.MonkeyPatch) -> None:
    with LLMServer("openai") as server:
        _use(monkeypatch, server, key=None)
        result = _ask(QUESTION, "--source", "wiki")
    assert result.exit_code == 1
    assert "nothing in the index matches" in result.stderr
    assert server.requests == []


def test_an_unreachable_database_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv("RAG_HOME", str(tmp_path))
    monkeypatch.setenv("RAG_VECTORDB_URL", f"postgresql://nobody@127.0.0.1:{port}/none")
    for variable in _LLM_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    result = _ask(QUESTION)
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: the vector database is unavailable")
