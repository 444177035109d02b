"""The worker pool that kills a worker when one item overruns its deadline."""

import os
import signal
import time

import pytest

from rag_pipeline.core.deadline_pool import (
    Answer,
    DeadlinePool,
    PoolClosedError,
    close_shared_pools,
    shared_pool,
    submit_shared,
)
from rag_pipeline.core.workers import DeadlineExceededError

pytestmark = pytest.mark.unit


def _work(item: str) -> str:
    """Sleeps on "slow", exits the process on "crash", raises on "bad", else echoes."""
    if item == "slow":
        time.sleep(30)
    if item == "crash":
        os._exit(3)
    if item == "bad":
        raise ValueError("a bad item")
    return f"{item}@{os.getpid()}"


def _echo(item: str) -> str:
    return f"echo {item}"


def test_answers_come_in_order_from_several_workers() -> None:
    items = [f"i{n}" for n in range(100)]
    with DeadlinePool(2, per_message=4) as pool:
        answers = pool.submit(_work, items, 10).result(timeout=60)
    assert [a.value.split("@")[0] for a in answers if a.value] == items
    assert len({a.value.split("@")[1] for a in answers if a.value}) == 2  # both did work
    assert str(os.getpid()) not in {a.value.split("@")[1] for a in answers if a.value}


def test_an_overrun_fails_its_item_alone_and_the_batch_goes_on() -> None:
    items = ["a", "b", "slow", "c", "d", "e"]
    started = time.monotonic()
    # The module is imported before the children count as started: its import (pytest
    # included) is not charged to the first item's deadline on a busy machine.
    with DeadlinePool(1, per_message=6, preload=__name__) as pool:
        answers = pool.submit(_work, items, 2).result(timeout=60)
    assert time.monotonic() - started < 20  # the sleeper was killed, not waited for
    assert isinstance(answers[2].error, DeadlineExceededError)
    assert str(answers[2].error) == "took more than 2 s"
    values = [a.value for a in answers]
    assert [v.split("@")[0] if v else None for v in values] == ["a", "b", None, "c", "d", "e"]
    # The items after the sleeper ran in a fresh worker.
    assert values[0]
    assert values[3]
    assert values[0].split("@")[1] != values[3].split("@")[1]


def test_a_crash_fails_its_item_and_an_error_is_handed_back() -> None:
    with DeadlinePool(2, per_message=2) as pool:
        first = pool.submit(_work, ["x", "crash", "y", "bad", "z"], 10)
        second = pool.submit(_echo, ["w"])
        answers = first.result(timeout=60)
        assert [a.value for a in second.result(timeout=60)] == ["echo w"]
    assert isinstance(answers[1].error, ChildProcessError)
    assert isinstance(answers[3].error, ValueError)
    assert str(answers[3].error) == "a bad item"
    assert [a.value.split("@")[0] for a in answers if a.value] == ["x", "y", "z"]


def test_no_deadline_waits_and_closing_stops_the_workers() -> None:
    pool = DeadlinePool(2)
    assert pool.submit(_work, []).result(timeout=1) == []
    answers = pool.submit(_work, ["p", "q"]).result(timeout=60)
    pids = {int(a.value.split("@")[1]) for a in answers if a.value}
    pool.close()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with pytest.raises(RuntimeError):
        pool.submit(_work, ["late"])


def test_stages_share_the_process_pool_until_it_is_closed() -> None:
    first = shared_pool(2, "")
    assert shared_pool(2, "") is first
    items = [f"i{n}" for n in range(40)]  # more than one message: both children work

    def pids() -> set[str]:
        return {a.value.split("@")[1] for a in first.submit(_work, items).result(60) if a.value}

    started = pids()
    assert len(started) == 2
    assert pids() <= started  # the same children
    close_shared_pools()
    assert first.closed
    assert shared_pool(2, "") is not first
    close_shared_pools()


def test_an_idle_pool_stops_its_children_and_a_shared_one_starts_again() -> None:
    pool = DeadlinePool(1, idle_seconds=0.3)
    (answer,) = pool.submit(_work, ["a"]).result(60)
    assert answer.value
    pid = int(answer.value.split("@")[1])
    deadline = time.monotonic() + 20
    while not pool.closed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool.closed
    pool.close()  # joins the thread, which has stopped the child
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(PoolClosedError):
        pool.submit(_work, ["b"])
    # The shared pool is looked up again on every submit: a closed one is replaced.
    (again,) = submit_shared(1, "", _echo, ["c"]).result(60)
    assert again.value == "echo c"
    close_shared_pools()


def _pids(answers: list[Answer[str]]) -> set[int]:
    return {int(a.value.split("@")[1]) for a in answers if a.value}


def test_an_idle_worker_killed_between_batches_is_replaced_and_nothing_fails() -> None:
    # Issue 49, item 5: sending to the dead idle child raised BrokenPipeError and the pool
    # stopped, failing the whole run.
    with DeadlinePool(2, per_message=2) as pool:
        # Both workers answer a batch before they are killed (on a loaded machine one worker
        # may take a whole batch: ask again until both have answered).
        victims: set[int] = set()
        for _ in range(20):
            first = pool.submit(_work, [f"a{n}" for n in range(20)], 10).result(timeout=60)
            victims |= _pids(first)
            if len(victims) == 2:
                break
        assert len(victims) == 2
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        for pid in victims:
            _wait_gone(pid)
        second = pool.submit(_work, [f"b{n}" for n in range(20)], 10).result(timeout=60)
        third = pool.submit(_work, ["c"], 10).result(timeout=60)
    assert all(a.error is None for a in [*second, *third])
    assert [a.value.split("@")[0] for a in second if a.value] == [f"b{n}" for n in range(20)]
    assert not _pids(second) & victims


def _wait_gone(pid: int) -> None:
    """Until `pid` is dead (a zombie until the pool reaps it, which it does at replacement)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            if stat.read().split(")")[-1].split()[0] in ("Z", "X"):
                return
        time.sleep(0.05)
    raise AssertionError(f"{pid} did not die")
