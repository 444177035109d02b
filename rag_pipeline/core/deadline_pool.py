"""Worker processes that run a function over many items, each item within a deadline.

A stage's conversion used to go through two hops: a process pool's worker received a batch
and sent every document on to a child of its own (`DeadlineRunner`) that could be killed when
a third-party parser overran its budget. Each worker and each of their children paid a
Python start and the converters' imports (about 0.4 s of CPU each), every document crossed
two pipes, and the pool sat idle while the stage loaded and stored its batches.

Decision: one hop. Each worker is a spawned child that the parent itself kills when an item
overruns: the parent sends a batch, the child answers item by item, and every answer starts
the next item's clock. A killed or dead child fails only the item it was working on; the
rest of its batch goes to a fresh child. A child that died while idle (the OOM killer) is
found when work is sent to it, and replaced: nothing fails (issue 49). A thread of the pool's
own sends, receives and kills (`connection.wait` over every child), so the caller submits
batches and goes on loading and storing while the children compute. Children are the same
kind as `workers.DeadlineRunner`'s: spawned, and gone when the process that made them dies
(see `core/workers.py`).

Starting the children is most of what a 1,000-document stage costs, so consecutive stages
share them: `shared_pool` keeps one pool per worker count and module for the process, until
`close_shared_pools` (the embeddings step calls it: the model needs the memory then) or
until it has had nothing to do for `SHARED_IDLE_SECONDS` (a Celery worker process, which
runs one step and waits for the next, does not keep them).
"""

import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Generic, TypeVar, cast

from rag_pipeline.core.workers import DeadlineExceededError, answer, start_child

_In = TypeVar("_In")
_Out = TypeVar("_Out")

# How often the pool's thread looks for new batches when every child is idle.
_IDLE_SECONDS = 0.05
# A shared pool with nothing to do for this long stops its children.
SHARED_IDLE_SECONDS = 30.0


class PoolClosedError(RuntimeError):
    """The pool was closed (or closed itself when idle) before the work was submitted."""


@dataclass(frozen=True)
class Answer(Generic[_Out]):
    """One item's outcome: its value, or the error it raised (or that stopped it)."""

    value: _Out | None = None
    error: BaseException | None = None


@dataclass
class _Batch(Generic[_In, _Out]):
    function: Callable[[_In], _Out]
    seconds: float | None
    items: Sequence[_In]
    future: "Future[list[Answer[_Out]]]"
    answers: list[Answer[_Out] | None]
    left: int


@dataclass
class _Child:
    process: BaseProcess
    conn: Connection
    # (batch, positions in it) being computed, in order; the first is the running item.
    work: deque[tuple[_Batch[object, object], int]] = field(default_factory=lambda: deque())
    started: float = 0.0  # when the running item's clock started


class DeadlinePool:
    """`workers` spawned children applying functions to items, each item within a deadline.

    Use: `submit(function, items, seconds)` returns a future of one `Answer` per item, in
    order. An item that runs past `seconds` (None: no limit) gets a `DeadlineExceededError`;
    one whose child died under it (out of memory, a crash in C code) a `ChildProcessError`.
    Close the pool (or use it as a context manager) to stop its children.
    """

    def __init__(
        self,
        workers: int,
        *,
        preload: str = "",
        per_message: int = 16,
        idle_seconds: float | None = None,
    ) -> None:
        """Args: preload: a module each child imports before it counts as started;
        per_message: items sent to a child in one message; idle_seconds: close after this
        long with nothing to do (None: stay until closed)."""
        self._idle_seconds = idle_seconds
        self._workers = workers
        self._preload = preload
        self._per_message = per_message
        self._queue: deque[tuple[_Batch[object, object], int]] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = False
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="deadline-pool", daemon=True)
        self._thread.start()

    def submit(
        self, function: Callable[[_In], _Out], items: Sequence[_In], seconds: float | None = None
    ) -> "Future[list[Answer[_Out]]]":
        """Queue `function` over `items` (picklable, both); the future's result is their
        answers in the same order."""
        future: Future[list[Answer[_Out]]] = Future()
        if not items:
            future.set_result([])
            return future
        batch = _Batch[_In, _Out](function, seconds, items, future, [None] * len(items), len(items))
        with self._lock:
            if self._failure is not None:
                raise RuntimeError("the worker pool stopped") from self._failure
            if self._closing:
                raise PoolClosedError("the worker pool is closed")
            pending = cast(_Batch[object, object], batch)
            self._queue.extend((pending, position) for position in range(len(items)))
        self._wake.set()
        return future

    def close(self) -> None:
        """Stop the children (work still queued is abandoned) and the pool's thread."""
        self._closing = True
        self._wake.set()
        self._thread.join()

    @property
    def closed(self) -> bool:
        """True once closed, or stopped by a fault of its own."""
        return self._closing or self._failure is not None

    def __enter__(self) -> "DeadlinePool":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # The pool's thread: starts the children (so their death signal is tied to it), feeds
    # them, collects answers and kills overrunning ones.
    def _serve(self) -> None:
        children: list[_Child] = []
        try:
            children = [self._start() for _ in range(self._workers)]
            for child in children:
                self._ready(child)
            idle_since = time.monotonic()
            while not self._closing:
                self._feed(children)
                busy = [c for c in children if c.work]
                if not busy:
                    if self._idled_out(idle_since):
                        break
                    self._wake.wait(_IDLE_SECONDS)
                    self._wake.clear()
                    continue
                idle_since = time.monotonic()
                ready = wait([c.conn for c in busy], timeout=self._timeout(busy))
                for child in busy:
                    if child.conn in ready:
                        self._receive(child, children)
                    elif (seconds := child.work[0][0].seconds) is not None and (
                        time.monotonic() - child.started > seconds
                    ):
                        error = DeadlineExceededError(f"took more than {seconds:g} s")
                        self._fail_running(child, children, error)
        except BaseException as exc:  # the pool's own fault: fail every waiting caller
            self._failure = exc
            self._abandon(children, exc)
        finally:
            for child in children:
                _stop(child)
            self._abandon(children, RuntimeError("the worker pool was closed"))

    def _idled_out(self, since: float) -> bool:
        if self._idle_seconds is None or time.monotonic() - since < self._idle_seconds:
            return False
        with self._lock:  # a submit either got in before, or finds the pool closed
            if self._queue:
                return False
            self._closing = True
            return True

    def _start(self) -> _Child:
        parent, child_end = cast(tuple[Connection, Connection], multiprocessing.Pipe())
        process = multiprocessing.get_context("spawn").Process(
            target=_work, args=(child_end, os.getpid(), self._preload), daemon=True
        )
        process.start()
        child_end.close()
        return _Child(process, parent)

    def _ready(self, child: _Child) -> None:
        try:
            child.conn.recv()  # imported: start-up is not counted against a deadline
        except EOFError:
            raise ChildProcessError("a worker process did not start") from None

    def _feed(self, children: list[_Child]) -> None:
        for index in range(len(children)):
            while not children[index].work:
                work = self._take()
                if not work:
                    return
                child, first = children[index], work[0][0]
                try:
                    child.conn.send((first.function, [first.items[i] for _, i in work]))
                except OSError:
                    # It died while idle (the OOM killer, a kill): none of `work` ran, so it
                    # goes back to the queue and a fresh child takes it.
                    with self._lock:
                        self._queue.extendleft(reversed(work))
                    self._replace(child, children)
                    continue
                child.work.extend(work)
                child.started = time.monotonic()

    def _take(self) -> list[tuple[_Batch[object, object], int]]:
        """The next message's work: up to `per_message` queued items of one batch (one
        function, one deadline)."""
        with self._lock:
            if not self._queue:
                return []
            first = self._queue[0][0]
            work: list[tuple[_Batch[object, object], int]] = []
            while self._queue and len(work) < self._per_message:
                if self._queue[0][0] is not first:
                    break
                work.append(self._queue.popleft())
            return work

    def _timeout(self, busy: list[_Child]) -> float:
        # Come back at least this often for new batches and for close().
        now, timeout = time.monotonic(), _IDLE_SECONDS
        for child in busy:
            seconds = child.work[0][0].seconds
            if seconds is not None:
                timeout = min(timeout, child.started + seconds - now)
        return max(0.0, timeout)

    def _receive(self, child: _Child, children: list[_Child]) -> None:
        try:
            ok, value = child.conn.recv()
        except EOFError:
            self._fail_running(child, children, ChildProcessError("its worker process died"))
            return
        batch, position = child.work.popleft()
        answer: Answer[object] = Answer(value=value) if ok else Answer(error=cast(Exception, value))
        _answer(batch, position, answer)
        child.started = time.monotonic()

    def _fail_running(self, child: _Child, children: list[_Child], error: BaseException) -> None:
        """Fail the child's running item, replace the child, requeue the rest of its work."""
        batch, position = child.work.popleft()
        _answer(batch, position, Answer(error=error))
        rest = list(child.work)
        child.work.clear()
        with self._lock:
            self._queue.extendleft(reversed(rest))
        self._replace(child, children)

    def _replace(self, child: _Child, children: list[_Child]) -> None:
        """Stop `child` (its work is requeued by the caller) and start a fresh one in its place."""
        _stop(child)
        replacement = self._start()
        children[children.index(child)] = replacement
        self._ready(replacement)

    def _abandon(self, children: list[_Child], error: BaseException) -> None:
        with self._lock:
            queued = list(self._queue)
            self._queue.clear()
        pending = {id(b): b for b, _ in queued}
        for child in children:
            pending.update({id(b): b for b, _ in child.work})
            child.work.clear()
        for batch in pending.values():
            if not batch.future.done():
                batch.future.set_exception(error)


def _answer(batch: _Batch[_In, _Out], position: int, answer: Answer[_Out]) -> None:
    batch.answers[position] = answer
    batch.left -= 1
    if batch.left == 0 and not batch.future.done():
        batch.future.set_result([a for a in batch.answers if a is not None])


def _stop(child: _Child) -> None:
    child.process.kill()
    child.process.join()
    child.conn.close()


def _work(conn: Connection, parent_pid: int, preload: str) -> None:
    """A child's loop: for each message (function, items), one answer per item, in order."""
    start_child(conn, parent_pid, preload)
    while True:
        try:
            function, items = conn.recv()
        except EOFError:
            return
        for item in items:
            answer(conn, function, item)


_shared: dict[tuple[int, str], DeadlinePool] = {}
_shared_lock = threading.Lock()


def shared_pool(workers: int, preload: str) -> DeadlinePool:
    """The process's pool of `workers` children that import `preload`, started if need be.

    Stages that run one after the other in a process use the same children; they stay until
    `close_shared_pools`, until idle for `SHARED_IDLE_SECONDS`, or until the process ends.
    """
    with _shared_lock:
        pool = _shared.get((workers, preload))
        if pool is None or pool.closed:
            pool = DeadlinePool(workers, preload=preload, idle_seconds=SHARED_IDLE_SECONDS)
            _shared[(workers, preload)] = pool
        return pool


def submit_shared(
    workers: int,
    preload: str,
    function: Callable[[_In], _Out],
    items: Sequence[_In],
    seconds: float | None = None,
) -> "Future[list[Answer[_Out]]]":
    """`DeadlinePool.submit` on the shared pool, started again if it just closed itself."""
    while True:
        try:
            return shared_pool(workers, preload).submit(function, items, seconds)
        except PoolClosedError:
            continue  # it idled out between lookup and submit: the next lookup starts one


def close_shared_pools() -> None:
    """Stop every shared pool's children (they hold memory the embedding model may need)."""
    with _shared_lock:
        pools = list(_shared.values())
        _shared.clear()
    for pool in pools:
        pool.close()
