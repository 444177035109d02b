"""The LLM client against a hostile endpoint (issue 38, items 8 and 9): local servers on
127.0.0.1 speaking the real wire formats, sending keep-alives and no answer, an answer that
never ends, 200 MB for 50 tokens, a line that never ends, terminal escape sequences, and error
bodies that echo the API key. Each test ends by the client's own limits; sizes are asserted by
what the server could send before the client hung up, and by the error."""

import socket

import pytest

from rag_pipeline.answer.llm import ChatProvider, LLMError, ProviderConfig, TextDelta
from rag_pipeline.core.redact import FRAGMENT_CHARS, mask_secrets, url_without_credentials
from rag_pipeline.core.terminal import HOLD_CHARS, ControlFilter, strip_controls
from rag_pipeline_tests.llm_servers import (
    Drip,
    EndlessLine,
    Fault,
    Flood,
    KeepAlive,
    LLMServer,
    Status,
    Wire,
)

pytestmark = pytest.mark.unit

KEY = "sk-TESTKEY-0123456789abcdefghijklmnopqrstuv"
WIRES: list[Wire] = ["anthropic", "openai"]
MB = 1024 * 1024


def _provider(
    server: LLMServer,
    *,
    timeout: float = 30.0,
    deadline: float = 60.0,
    max_tokens: int = 1024,
    key: str | None = KEY,
    base_url: str | None = None,
) -> ChatProvider:
    config = ProviderConfig(
        provider=server.wire,
        base_url=base_url or server.url,
        model="test-model",
        api_key=key,
        max_tokens=max_tokens,
        timeout=timeout,
        retries=0,
        deadline=deadline,
    )
    return ChatProvider(config, sleep=lambda _: None)


def _answer(provider: ChatProvider) -> str:
    events = provider.stream("system", "user")
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def _fails(wire: Wire, fault: Fault, **options: float) -> tuple[str, LLMServer]:
    with LLMServer(wire, faults=[fault]) as server, pytest.raises(LLMError) as error:
        _answer(_provider(server, **options))  # type: ignore[arg-type]
    message = str(error.value)
    assert "\n" not in message
    return message, server


@pytest.mark.parametrize("wire", WIRES)
def test_keep_alives_do_not_extend_the_timeout(wire: Wire) -> None:
    # A comment (and a ping) every 0.1 s: each read returns within the 1-second timeout,
    # yet no answer text ever comes.
    message, _ = _fails(wire, KeepAlive(0.1), timeout=1.0, deadline=60.0)
    assert "no answer text for 1 s, only keep-alives (RAG_LLM_TIMEOUT_SECONDS)" in message


@pytest.mark.parametrize("wire", WIRES)
def test_an_endless_answer_stops_at_the_deadline(wire: Wire) -> None:
    # Text keeps coming (so the idle timeout never fires), but the call has an end.
    message, _ = _fails(wire, Drip(0.05), timeout=30.0, deadline=1.0)
    assert "no complete answer within 1 s (RAG_LLM_DEADLINE_SECONDS)" in message


@pytest.mark.parametrize("wire", WIRES)
def test_an_answer_far_beyond_max_tokens_is_cut(wire: Wire) -> None:
    message, server = _fails(wire, Flood(200 * MB), max_tokens=50)
    assert "the answer exceeded 3,200 bytes (64 per token of RAG_LLM_MAX_ANSWER_TOKENS)" in (
        message
    )
    # The client hung up after its first piece: the server could only fill socket buffers.
    (sent,) = server.sent()
    assert sent < 20 * MB


@pytest.mark.parametrize("wire", WIRES)
def test_an_endless_line_is_cut(wire: Wire) -> None:
    message, server = _fails(wire, EndlessLine(), max_tokens=1024)
    assert "a line of the stream exceeded" in message
    assert "RAG_LLM_MAX_ANSWER_TOKENS" in message
    (sent,) = server.sent()
    assert sent < 30 * MB


ESCAPES = (
    "Start\x1b]52;c;ZWNobyBwd25lZA==\x07 clipboard, "  # OSC 52: write the clipboard
    "\x1b]0;owned title\x1b\\ title, "  # OSC 0: the window title, ST-terminated
    "\x1b[2J\x1b[H cleared, "  # CSI: clear the screen, cursor home
    "\x1bc reset, "  # RIS: reset the terminal
    "\x9b31m red, "  # 8-bit CSI
    "\x9d0;c1 title\x9c c1, "  # 8-bit OSC
    "bell\x07 back\x08space cr\roverwrite\x00nul\x7fdel\n"
    "\tkept. End"
)


@pytest.mark.parametrize("wire", WIRES)
def test_escape_sequences_never_reach_the_terminal(wire: Wire) -> None:
    with LLMServer(wire, answer=ESCAPES) as server:
        text = _answer(_provider(server))
    assert text == (
        "Start clipboard,  title,  cleared,  reset,  red,  c1, "
        "bell backspace croverwritenuldel\n\tkept. End"
    )
    assert not any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in text)


def test_a_sequence_split_across_pieces_is_still_removed() -> None:
    text = "a\x1b]52;c;ZWNobyBwd25lZA==\x07b\x1b[2Jc\x9b1;31md"
    for size in (1, 2, 3, 7):
        control = ControlFilter()
        pieces = [control.feed(text[i : i + size]) for i in range(0, len(text), size)]
        assert "".join(pieces) + control.flush() == "abcd", size
    # An introducer that never completes is held at most HOLD_CHARS characters, then dropped.
    control = ControlFilter()
    out = control.feed("x\x1b]" + "y" * (HOLD_CHARS + 10))
    assert out == "x]" + "y" * (HOLD_CHARS + 10)
    assert strip_controls("\x1b]0;t") == "]0;t"


@pytest.mark.parametrize("wire", WIRES)
def test_a_key_echoed_past_the_cut_or_over_two_lines_is_masked(wire: Wire) -> None:
    padding = "x" * 180  # the key starts before and ends after the 200-character cut
    split = f"{KEY[:15]}\n{KEY[15:]}"
    faults: list[Fault] = [
        Status(401, message=f"{padding} Bearer {KEY} is not valid"),
        Status(401, message=f"invalid key {split}"),
        Status(403, message=f"{padding} {KEY[:20]}"),
    ]
    with LLMServer(wire, faults=faults) as server:
        for _ in faults:
            with pytest.raises(LLMError) as error:
                _answer(_provider(server))
            message = str(error.value)
            assert "***" in message
            for start in range(len(KEY) - FRAGMENT_CHARS + 1):
                assert KEY[start : start + FRAGMENT_CHARS] not in message
            assert KEY[:15] not in message.replace(" ", "")


def test_url_credentials_never_appear_in_messages() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    notices: list[str] = []
    base = f"http://admin:pa55-w0rd-secret@127.0.0.1:{port}/v1"
    config = ProviderConfig(provider="openai", base_url=base, model="m", retries=1)
    provider = ChatProvider(config, sleep=lambda _: None, on_retry=notices.append)
    with pytest.raises(LLMError) as error:
        _answer(provider)
    shown = " ".join([str(error.value), *notices, config.label])
    assert "pa55-w0rd-secret" not in shown
    assert "admin" not in shown
    assert f"http://***@127.0.0.1:{port}/v1" in str(error.value)
    assert notices, "the retry was announced"


def test_masking_runs_before_any_cut() -> None:
    text = "k" * 195 + KEY
    masked = mask_secrets(text, [KEY])
    assert masked == "k" * 195 + "***"
    assert mask_secrets(f"{KEY[:14]}", [KEY]) == "***"  # a fragment alone
    assert mask_secrets("short key abc", ["abc"]) == "short key abc"  # too short to search
    assert url_without_credentials("https://u:p@h:1/x?q=1") == "https://***@h:1/x?q=1"


@pytest.mark.parametrize("wire", WIRES)
def test_a_flood_of_an_error_body_is_read_only_in_part(wire: Wire) -> None:
    message = "overloaded " * (5 * MB // 11)
    server = LLMServer(wire, faults=[Status(500, message=message)])
    with server, pytest.raises(LLMError) as error:
        _answer(_provider(server))
    assert "server error (HTTP 500) after 1 attempt(s)" in str(error.value)
    assert len(str(error.value)) < 400
