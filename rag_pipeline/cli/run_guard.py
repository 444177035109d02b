"""A killed `rag ingest` leaves no run `STARTED` in Dagster's run storage (issue 49).

`rag ingest` executes its runs in a thread of its own process: killed, nothing told the run
storage, and the run stayed `STARTED` for ever (the UI showed it running). So:

- SIGTERM is turned into an exception like SIGINT's `KeyboardInterrupt` while runs execute
  (only where SIGTERM had its default action), and an interrupted run is reported canceled;
- each run carries the process's id and start time (`OWNER_TAG`); at the next `rag ingest`, a
  run still `STARTED`/`STARTING` whose process is gone (SIGKILL, a crash, a reboot) is
  reported failed, naming it.
"""

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Iterator
from typing import Any

OWNER_TAG = "rag/owner"


class Terminated(BaseException):
    """SIGTERM arrived while runs executed (a BaseException, as `KeyboardInterrupt`)."""


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # Field 22 of stat(5); after the command's closing parenthesis, it is the 20th.
    return fields[19] if len(fields) > 19 and fields[0] not in ("Z", "X") else None


def owner() -> str:
    """This process as a run's owner: host, pid and start time (pids are reused)."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_time(pid) or ''}"


def _alive(tag: str) -> bool:
    host, _, rest = tag.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's process: not ours to judge
    return bool(started) and _start_time(int(pid)) == started


def fail_abandoned_runs(instance: Any) -> list[str]:
    """Report failed the runs of `rag ingest` processes that are gone; their run ids."""
    import dagster as dg

    running = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING]
    failed: list[str] = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=running)):
        tag = run.tags.get(OWNER_TAG)
        if tag is None or _alive(tag):
            continue
        instance.report_run_failed(
            run, message=f"the `rag ingest` process that ran it ({tag}) is gone"
        )
        failed.append(run.run_id)
    return failed


def cancel_run(instance: Any, run_id: str, reason: str) -> None:
    """Report the run canceled unless it already ended."""
    run = instance.get_run_by_id(run_id) if run_id else None
    if run is not None and not run.is_finished:
        instance.report_run_canceled(run, message=reason)


def raise_terminated(signum: int, frame: object) -> None:
    """A SIGTERM handler: raise `Terminated` in the main thread."""
    raise Terminated


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """SIGTERM raises `Terminated` in the main thread meanwhile (if it had its default
    action: an ignored SIGTERM stays ignored)."""
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
