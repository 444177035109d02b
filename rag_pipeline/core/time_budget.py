"""A wall-clock budget for pure-Python work that cannot be told to stop (a parser).

markdown-it and mdformat are linear, but slow on hostile input: 200,000 `[` take about 20 s,
an 820 KB table about 18 s, so a 5 MiB file could hold a worker for minutes. They have no
cancellation hook, and signals (SIGALRM) reach only the main thread, while conversion runs in
a Dagster step thread or a pool worker. Decision: a timer thread raises an exception *in the
working thread* (`PyThreadState_SetAsyncExc`), which Python delivers at the next bytecode;
the caller turns it into that document's failure.
"""

import ctypes
import threading
from collections.abc import Generator
from contextlib import contextmanager


class BudgetExpired(BaseException):
    """Raised inside the working thread when its budget is spent.

    A BaseException, so that the `except Exception` inside third-party code cannot swallow it.
    """


@contextmanager
def time_budget(seconds: float | None) -> Generator[None]:
    """Raise `BudgetExpired` in the calling thread if the block runs longer than `seconds`.

    Only Python bytecode is interrupted: a single long C call finishes first.

    Args:
        seconds: The budget; None means no limit.
    """
    if seconds is None:
        yield
        return
    thread_id = threading.get_ident()
    lock = threading.Lock()
    fired = threading.Event()
    done = threading.Event()

    def expire() -> None:
        with lock:
            if done.is_set():
                return
            fired.set()
            _set_async_exc(thread_id, BudgetExpired)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            done.set()
            if fired.is_set():
                # Finished (or failed) before the exception arrived: withdraw it.
                _set_async_exc(thread_id, None)
        timer.cancel()


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None
    )
