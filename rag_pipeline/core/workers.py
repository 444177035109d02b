"""Process pools whose workers never outlive the process that created them.

`kill -9` of `rag ingest` during conversion used to leave the forkserver, its workers and
multiprocessing's resource tracker running: a worker blocked on its task queue holds that
queue's write end itself, so it never sees end-of-file, and nothing tells it that its parent
is gone.

Decision: workers are started with "spawn" (no forkserver process to leave behind, and no
fork of a multi-threaded parent), so each worker is a direct child of the pool's creator.
Each worker asks Linux for SIGKILL when its parent dies (`PR_SET_PDEATHSIG`) and also runs a
watchdog thread that polls its parent's pid, which works on every platform. The resource
tracker exits by itself once the parent and every worker have closed its pipe.

`DeadlineRunner` uses the same kind of child for one call at a time with a deadline, for
parsers that cannot be interrupted otherwise (see `core/time_budget.py`).
"""

import ctypes
import ctypes.util
import importlib
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import TypeVar, cast

_PR_SET_PDEATHSIG = 1
# How often the watchdog looks at the parent pid; a dead parent's workers go within this.
_WATCH_SECONDS = 0.5


def worker_pool(
    workers: int,
    *,
    initializer: Callable[..., object] | None = None,
    initargs: tuple[object, ...] = (),
) -> ProcessPoolExecutor:
    """A process pool whose workers exit when the calling process dies, even by SIGKILL.

    Create and use the pool from one thread: on Linux the death signal is tied to the thread
    that started the worker.

    Args:
        workers: Number of worker processes.
        initializer: Called in each worker after the parent watch is installed.
        initargs: Arguments for `initializer`.

    Returns:
        A `ProcessPoolExecutor` using the "spawn" start method.
    """
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(os.getpid(), initializer, initargs),
    )


def _start_worker(
    parent_pid: int, initializer: Callable[..., object] | None, initargs: tuple[object, ...]
) -> None:
    watch_parent(parent_pid)
    if initializer is not None:
        initializer(*initargs)


def watch_parent(parent_pid: int) -> None:
    """Make the current process exit as soon as `parent_pid` is no longer its parent."""
    if sys.platform.startswith("linux"):
        _set_parent_death_signal()
    # The parent may have died before the death signal was armed: then we are already orphaned.
    if os.getppid() != parent_pid:
        os._exit(1)
    threading.Thread(target=_watch, args=(parent_pid,), name="parent-watchdog", daemon=True).start()


def _set_parent_death_signal() -> None:
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return
    libc = ctypes.CDLL(libc_name, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def _watch(parent_pid: int) -> None:
    stop = threading.Event()
    while not stop.wait(_WATCH_SECONDS):
        if os.getppid() != parent_pid:
            # os._exit: no cleanup handlers, which could block on the dead parent's queues.
            os._exit(1)


_In = TypeVar("_In")
_Out = TypeVar("_Out")


class DeadlineExceededError(Exception):
    """A call ran past its deadline; its process was killed."""


class DeadlineRunner:
    """Runs calls in one spawned child process and kills it when a call overruns.

    For work that cannot be told to stop (a third-party parser): instead of interrupting a
    thread, the process running it is killed and a fresh one started for the next call.
    Arguments, results and exceptions cross the process boundary by pickling. Use a runner
    from one thread (`thread_runner` keeps one per thread): on Linux the child is killed
    when the thread that started it ends.
    """

    def __init__(self, preload: str = "") -> None:
        """Args: preload: a module the child imports before its first call is timed."""
        self._preload = preload
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None

    def call(self, function: Callable[[_In], _Out], argument: _In, seconds: float) -> _Out:
        """Return `function(argument)` run in the child.

        Raises:
            DeadlineExceededError: The call took more than `seconds`; the child is killed.
            ChildProcessError: The child died during the call.
            Exception: Whatever `function` raised, re-raised here.
        """
        conn = self._connection()
        try:
            conn.send((function, argument))
        except OSError:  # the child died since it last answered
            self.close()
            raise ChildProcessError("its worker process died") from None
        if not conn.poll(seconds):
            self.close()
            raise DeadlineExceededError(f"took more than {seconds:g} s")
        try:
            ok, value = conn.recv()
        except EOFError:  # the child died (out of memory, a crash in C code)
            self.close()
            raise ChildProcessError("its worker process died") from None
        if ok:
            return cast(_Out, value)
        raise cast(BaseException, value)

    def close(self) -> None:
        """Kill the child (if any); the next call starts a new one."""
        if self._process is not None:
            self._process.kill()
            self._process.join()
        if self._conn is not None:
            self._conn.close()
        self._process, self._conn = None, None

    def _connection(self) -> Connection:
        if self._conn is not None and self._process is not None and self._process.is_alive():
            return self._conn
        self.close()
        # (typeshed types the pipe as Windows' PipeConnection on some platforms)
        parent, child = cast(tuple[Connection, Connection], multiprocessing.Pipe())
        process = multiprocessing.get_context("spawn").Process(
            target=_serve, args=(child, os.getpid(), self._preload), daemon=True
        )
        process.start()
        child.close()
        self._process, self._conn = process, parent
        try:
            parent.recv()  # ready: imported, so start-up is not counted against a deadline
        except EOFError:
            self.close()
            raise ChildProcessError("its worker process did not start") from None
        return parent


_runners = threading.local()


def thread_runner(preload: str = "") -> DeadlineRunner:
    """The calling thread's `DeadlineRunner` (one per thread and `preload`)."""
    runners: dict[str, DeadlineRunner] | None = getattr(_runners, "by_module", None)
    if runners is None:
        runners = {}
        _runners.by_module = runners
    runner = runners.get(preload)
    if runner is None:
        runner = runners[preload] = DeadlineRunner(preload)
    return runner


def start_child(conn: Connection, parent_pid: int, preload: str) -> None:
    """A spawned child's start: watch the parent, import `preload`, then say it is ready."""
    watch_parent(parent_pid)
    if preload:
        importlib.import_module(preload)
    conn.send(None)


def answer(conn: Connection, function: Callable[[_In], object], argument: _In) -> None:
    """Send `(True, function(argument))`, or `(False, the exception)` for the caller to raise."""
    try:
        reply: tuple[bool, object] = (True, function(argument))
    except Exception as exc:  # handed to the caller, who decides
        reply = (False, exc)
    try:
        conn.send(reply)
    except Exception as exc:  # an unpicklable result or exception
        conn.send((False, RuntimeError(f"{type(exc).__name__}: {exc}")))


def _serve(conn: Connection, parent_pid: int, preload: str) -> None:
    start_child(conn, parent_pid, preload)
    while True:
        try:
            function, argument = conn.recv()
        except EOFError:
            return
        answer(conn, function, argument)
