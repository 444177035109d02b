"""A run of a job in a thread, with a progress bar that follows its steps.

`rag ingest` starts each partition's run with Dagster's `execute_job` and, while it runs,
finds the run by a tag of its own and counts its finished steps in the instance's event log.
"""

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import click

from rag_pipeline.cli.run_guard import (
    OWNER_TAG,
    Terminated,
    cancel_run,
    owner,
    raise_terminated,
)

# The code location `dagster job execute -m` loads, whose jobs `rag ingest` runs.
CODE_LOCATION_MODULE = "rag_pipeline.definitions"
CODE_LOCATION_ATTRIBUTE = "defs"
# Tags the run so the command finds it while it runs (`execute_job` makes its own run id).
_INVOCATION_TAG = "rag/ingest"
# A failed run's cause as printed: one line.
_CAUSE_CHARS = 400


@dataclass
class RunSummary:
    """What one partition's run did, for the terminal."""

    source: str
    partition_key: str
    success: bool
    error: str = ""
    seconds: float = 0.0
    run_id: str = ""
    stats: dict[str, Any] = field(default_factory=lambda: {})
    failures: list[tuple[str, str, str, str]] = field(default_factory=lambda: [])


def failure_cause(event: Any) -> str:
    """A failed step's cause in one line: the innermost error Dagster wrapped, not its
    "Execution of step … failed." (issue 49: wiki runs named no cause)."""
    data = event.step_failure_data
    error = data.error if data is not None else None
    if error is None:
        return " ".join((event.message or "").split())
    while error.cause is not None:
        error = error.cause
    # Dagster writes "package.module.Class: message"; the class's own name is enough.
    cause = " ".join(error.message.split())
    _, found, message = cause.partition(f"{error.cls_name}: ")
    cause = f"{error.cls_name}: {message}" if found else cause
    from rag_pipeline.orchestration.source_registry import step_label

    step = step_label(event.step_key) if event.step_key else "a step"
    return f"{step}: {cause}"[:_CAUSE_CHARS]


def execute_with_progress(
    instance: Any,
    job_name: str,
    invocation: str,
    partition_key: str,
    run_config: dict[str, Any],
    summary: RunSummary,
) -> None:
    """Run the job of the code location in a thread, filling `summary`, under a progress bar."""
    import dagster as dg
    from dagster._core.definitions.reconstruct import ReconstructableRepository

    # What `dagster job execute -m rag_pipeline.definitions` runs: the job reconstructable
    # from the module, so an out-of-process executor (multiprocess, Celery) can load it too.
    job = ReconstructableRepository.for_module(
        CODE_LOCATION_MODULE, CODE_LOCATION_ATTRIBUTE
    ).get_reconstructable_job(job_name)

    def execute() -> None:
        try:
            with dg.execute_job(
                job,
                instance=instance,
                run_config=run_config,
                tags={
                    "dagster/partition": partition_key,
                    _INVOCATION_TAG: invocation,
                    OWNER_TAG: owner(),
                },
                raise_on_error=False,
            ) as result:
                summary.run_id = result.run_id
                summary.success = result.success
                failure = next((e for e in result.all_events if e.is_step_failure), None)
                summary.error = failure_cause(failure) if failure else ""
        except Exception as exc:  # surfaced by the caller, after the progress bar closes
            summary.error = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=execute, daemon=True)
    started = time.perf_counter()
    try:
        with _terminable_children():
            worker.start()
            _show_progress(worker, instance, invocation, summary)
    except (KeyboardInterrupt, Terminated) as exc:
        # The run's thread dies with this process: the run storage is told (issue 49).
        reason = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT (Ctrl-C)"
        runs = instance.get_runs(filters=dg.RunsFilter(tags={_INVOCATION_TAG: invocation}))
        for run in runs[:1]:
            cancel_run(instance, run.run_id, f"`rag ingest` was stopped by {reason}")
        raise
    summary.seconds = time.perf_counter() - started


@contextmanager
def _terminable_children() -> Iterator[None]:
    """SIGTERM caught while a run starts processes, when it was ignored.

    Dagster mirrors each step's output with a `tail -F` that it stops with SIGTERM. A child
    inherits an ignored signal: started from a shell or CI runner that ignores SIGTERM, each
    step waited 30 s for its `tail`, and the tails outlived `rag ingest`, holding its stdout
    open, so a caller reading that output never saw it end. A caught signal is reset to its
    default in a started program, so the tails end; this process raises `Terminated` and
    reports the run canceled, where the default action would kill it with the run left
    started.
    """
    ignored = signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    if not ignored or threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _show_progress(
    worker: threading.Thread, instance: Any, invocation: str, summary: RunSummary
) -> None:
    import dagster as dg

    label = f"{summary.source}/{short(summary.partition_key)}"
    run_id = ""
    steps = 1
    with click.progressbar(length=1000, label=label) as bar:
        done = 0
        while worker.is_alive():
            worker.join(0.25)
            if not run_id:
                runs = instance.get_runs(
                    filters=dg.RunsFilter(tags={_INVOCATION_TAG: invocation}), limit=1
                )
                if not runs or runs[0].execution_plan_snapshot_id is None:
                    continue
                run_id = runs[0].run_id
                plan = instance.get_execution_plan_snapshot(runs[0].execution_plan_snapshot_id)
                steps = max(len(plan.steps), 1)
            finished = min(_finished_steps(instance, run_id) * 1000 // steps, 1000)
            bar.update(finished - done)
            done = finished
        bar.update(1000 - done)


def _finished_steps(instance: Any, run_id: str) -> int:
    import dagster as dg

    records = instance.get_records_for_run(
        run_id, of_type={dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}
    ).records
    return len(records)


def short(partition_key: str) -> str:
    """A partition key cut to its last 40 characters, for the terminal."""
    return partition_key if len(partition_key) <= 40 else "…" + partition_key[-39:]
