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
"""

import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

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
