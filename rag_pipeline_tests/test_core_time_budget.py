"""Time budgets without exceptions injected into threads: a cooperative deadline for our
own code and markdown-it, a killed child process for the third-party converters."""

import os
import threading
import time

import pytest
from markdown_it import MarkdownIt

from rag_pipeline.core.chunking import ChunkLimitError, chunk_markdown
from rag_pipeline.core.time_budget import Deadline, TimeBudgetError, watch_parser
from rag_pipeline.core.workers import DeadlineExceededError, DeadlineRunner

pytestmark = pytest.mark.unit


def count_words(text: str) -> int:
    return len(text.split()) + 2


def test_no_deadline_never_expires() -> None:
    Deadline.after(None).check()


def test_a_passed_deadline_raises() -> None:
    with pytest.raises(TimeBudgetError):
        Deadline(time.monotonic() - 1).check()


def test_a_watched_parser_stops_at_its_deadline_and_parses_the_same_without() -> None:
    md = watch_parser(MarkdownIt("commonmark"))
    text = "# Title\n\n" + "[" * 2000 + "\n\n- a\n- b\n"
    assert [t.type for t in md.parse(text)] == [t.type for t in MarkdownIt().parse(text)]
    with pytest.raises(TimeBudgetError):
        md.parse(text, Deadline(time.monotonic() - 1).env())


def test_chunking_past_its_budget_fails_with_a_reason() -> None:
    # 20,000 empty headings: many blocks, each checked against the deadline.
    with pytest.raises(ChunkLimitError, match="to chunk"):
        chunk_markdown(
            "#\n" * 20_000, title="t", breadcrumb="", count_tokens=count_words,
            time_budget_seconds=0.001,
        )  # fmt: skip


def test_chunking_within_its_budget_is_unchanged() -> None:
    text = "# A\n\nSome text here. More text.\n\n## B\n\n- x\n- y\n"
    quick = chunk_markdown(
        text, title="t", breadcrumb="", count_tokens=count_words, time_budget_seconds=60
    )
    unbounded = chunk_markdown(
        text, title="t", breadcrumb="", count_tokens=count_words, time_budget_seconds=None
    )
    assert quick == unbounded
    assert quick[1]


def _sleep_then_pid(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def _fail(message: str) -> None:
    raise ValueError(message)


def test_the_runner_returns_results_and_raises_errors_from_its_child() -> None:
    runner = DeadlineRunner()
    try:
        child = runner.call(_sleep_then_pid, 0.0, 30)
        assert child != os.getpid()
        assert runner.call(_sleep_then_pid, 0.0, 30) == child  # the child is reused
        with pytest.raises(ValueError, match="bad document"):
            runner.call(_fail, "bad document", 30)
    finally:
        runner.close()


def test_an_overrun_kills_the_child_and_the_next_call_gets_a_new_one() -> None:
    runner = DeadlineRunner()
    try:
        first = runner.call(_sleep_then_pid, 0.0, 30)
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError):
            runner.call(_sleep_then_pid, 60.0, 0.2)
        assert time.monotonic() - started < 30  # did not wait for the sleep
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)
        assert runner.call(_sleep_then_pid, 0.0, 30) not in (first, os.getpid())
    finally:
        runner.close()


def test_the_calling_thread_is_not_interrupted() -> None:
    # The old budget raised inside the working thread; now nothing reaches it afterwards.
    outcome: list[str] = []

    def work() -> None:
        runner = DeadlineRunner()
        try:
            with pytest.raises(DeadlineExceededError):
                runner.call(_sleep_then_pid, 60.0, 0.1)
            time.sleep(0.3)
            outcome.append("finished")
        finally:
            runner.close()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    assert outcome == ["finished"]
