"""The incremental step every stage shares: decide which documents need work, do it, keep going.

A stage remembers, per document, the hash of the input it was computed from (the upstream
content hash combined with the stage's own settings fingerprint). A document whose input hash
is unchanged costs nothing; a document that fails keeps its previous output, so the previous
good version stays searchable while the failure is recorded.

Documents stream through a stage in batches: a batch is loaded, transformed and handed to
`store` before the next is loaded, so no stage holds every document's body at once.
"""

import logging
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar, cast, runtime_checkable

from rag_pipeline.core.deadline_pool import Answer, shared_pool, submit_shared
from rag_pipeline.core.ids import stable_id
from rag_pipeline.core.models import FailedDocument

logger = logging.getLogger(__name__)

# Below this many documents a process pool costs more than it saves.
PARALLEL_MIN_DOCUMENTS = 200
# Documents loaded, transformed and stored together: bounds a stage's memory.
BATCH_DOCUMENTS = 64
In = TypeVar("In")
Out = TypeVar("Out")
In_contra = TypeVar("In_contra", contravariant=True)


@runtime_checkable
class Budgeted(Protocol[In_contra]):
    """A transform with a time budget per document that a worker pool can enforce.

    In-process, the transform enforces its budget itself (for a third-party converter, by
    running it in a child it kills). In a worker pool the worker is that child: it runs
    `unbudgeted()` and the pool kills it when one document takes more than `budget_seconds`.
    """

    @property
    def budget_seconds(self) -> float | None:
        """Most seconds one document may take (None: no limit)."""
        ...

    def unbudgeted(self) -> Callable[[In_contra], object]:
        """The same transform with no budget of its own (the pool enforces it)."""
        ...

    def stopped(self, record: In_contra, error: BaseException) -> str:
        """Why a document failed when its worker was killed or died under it."""
        ...


@dataclass(frozen=True)
class Plan:
    """Which documents a stage must compute now, and which it keeps as they are."""

    todo: dict[str, str]  # doc key -> input hash
    kept: frozenset[str]


def input_hash(upstream_hash: str, fingerprint: str) -> str:
    """The input identity of a document for a stage with the given settings fingerprint."""
    return stable_id(upstream_hash, fingerprint)


def plan(
    upstream: Mapping[str, str],
    previous_inputs: Mapping[str, str],
    fingerprint: str,
    *,
    force: bool = False,
) -> Plan:
    """Split the upstream documents into those to compute and those already up to date."""
    todo: dict[str, str] = {}
    kept: set[str] = set()
    for key, upstream_hash in upstream.items():
        wanted = input_hash(upstream_hash, fingerprint)
        if not force and previous_inputs.get(key) == wanted:
            kept.add(key)
        else:
            todo[key] = wanted
    return Plan(todo=todo, kept=frozenset(kept))


@dataclass
class StageSummary:
    """What a stage did for one partition: counts and failures, never document bodies.

    `written` are the documents computed now (`new` of them never stored before); `kept`
    the ones left as they were (unchanged, or failed with a previous version to keep).
    """

    stage: str
    written: list[str] = field(default_factory=lambda: [])
    new: int = 0
    kept: set[str] = field(default_factory=lambda: set())
    failed: list[FailedDocument] = field(default_factory=lambda: [])
    preview_key: str = ""
    preview_text: str = ""

    def fail(self, key: str, reason: str, previous_inputs: Mapping[str, str]) -> None:
        """Record a failure; the document's previous output (if any) stays as it was."""
        self.failed.append(FailedDocument(key, self.stage, reason))
        if key in previous_inputs:
            self.kept.add(key)

    def counts(self) -> dict[str, int]:
        """New / changed / unchanged / failed document counts."""
        failed = {f.source_id for f in self.failed}
        return {
            "new": self.new,
            "changed": len(self.written) - self.new,
            "unchanged": len(self.kept - failed),
            "failed": len(failed),
        }


@dataclass(frozen=True)
class _Outcome(Generic[Out]):
    """A transform's result for one document, or why it failed (picklable)."""

    key: str
    result: Out | None
    reason: str = ""
    trace: str = ""


def _apply(transform: Callable[[In], Out], key: str, record: In) -> _Outcome[Out]:
    try:
        return _Outcome(key, transform(record))
    except Exception as exc:  # one bad document must not stop the partition
        reason, expected = failure_reason(exc)
        return _Outcome(key, None, reason, "" if expected else traceback.format_exc())


@dataclass(frozen=True)
class _Keyed(Generic[In, Out]):
    """`transform` over `(key, record)` pairs, failures caught (picklable for workers)."""

    transform: Callable[[In], Out]

    def __call__(self, item: tuple[str, In]) -> _Outcome[Out]:
        return _apply(self.transform, *item)


def _apply_batch(
    transform: Callable[[In], Out], items: Sequence[tuple[str, In]]
) -> list[_Outcome[Out]]:
    return [_apply(transform, key, record) for key, record in items]


def failure_reason(error: BaseException) -> tuple[str, bool]:
    """A reason a person can act on, and whether it is an input problem we expect."""
    reason = str(error) or type(error).__name__
    if isinstance(error, ValueError | UnicodeError | OSError):
        return reason, True
    return f"{type(error).__name__}: {reason}", False


def _batches(keys: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(keys), size):
        yield list(keys[start : start + size])


def run_stage(
    *,
    stage: str,
    work: Plan,
    previous_inputs: Mapping[str, str],
    load: Callable[[Sequence[str]], Iterable[tuple[str, In]]],
    transform: Callable[[In], Out],
    store: Callable[[list[tuple[str, str, Out]]], None],
    reject: Callable[[Out], str | None] | None = None,
    preview: Callable[[Out], str] | None = None,
    workers: int = 1,
) -> StageSummary:
    """Compute the planned documents batch by batch; a failure is recorded, never fatal.

    `load(keys)` yields `(key, input record)` pairs; `store(rows)` persists a batch of
    `(key, input hash, output)`; `reject(output)` is a per-document rule whose reason, when
    it returns one, fails that document alone. With `workers` > 1 and at least
    `PARALLEL_MIN_DOCUMENTS` documents, the transform runs in that many processes
    (`transform` is then pickled); below that, starting them would cost more than they save.
    """
    summary = StageSummary(stage=stage, kept=set(work.kept))
    keys = sorted(work.todo)

    def keep(outcomes: Sequence[_Outcome[Out]]) -> None:
        rows: list[tuple[str, str, Out]] = []
        for outcome in outcomes:
            result = outcome.result
            if result is None:
                if outcome.trace:
                    # Not an input problem we expect: keep the traceback for debugging.
                    logger.error("%s failed on %s:\n%s", stage, outcome.key, outcome.trace)
                summary.fail(outcome.key, outcome.reason, previous_inputs)
                continue
            reason = reject(result) if reject is not None else None
            if reason:
                summary.fail(outcome.key, reason, previous_inputs)
                continue
            rows.append((outcome.key, work.todo[outcome.key], result))
        store(rows)
        for key, _, result in rows:
            summary.written.append(key)
            summary.new += key not in previous_inputs
            if preview is not None and not summary.preview_key:
                summary.preview_key, summary.preview_text = key, preview(result)

    if workers > 1 and len(keys) >= PARALLEL_MIN_DOCUMENTS:
        _run_in_workers(keys, load, transform, keep, workers)
    else:
        for batch in _batches(keys, BATCH_DOCUMENTS):
            keep(_apply_batch(transform, list(load(batch))))
    return summary


def start_workers(workers: int, module: str, documents: int) -> None:
    """Start the shared workers a stage of `documents` will use, so that it finds them ready.

    `module` is the transform's module, the one they import; nothing happens below the
    size at which a stage uses workers.
    """
    if workers > 1 and documents >= PARALLEL_MIN_DOCUMENTS:
        shared_pool(workers, module)


def _run_in_workers(
    keys: Sequence[str],
    load: Callable[[Sequence[str]], Iterable[tuple[str, In]]],
    transform: Callable[[In], Out],
    keep: Callable[[Sequence[_Outcome[Out]]], None],
    workers: int,
) -> None:
    """Transform in worker processes while this thread loads the next batch and stores the last.

    At most two batches are in flight, so memory stays bounded by the batch size. The
    workers are the process's shared ones (`deadline_pool.shared_pool`): the next stage
    finds them started.
    """
    budgeted: Budgeted[In] | None = None
    runs: Callable[[In], Out] = transform
    # The children import the transform's module on start (a function's, or an instance's).
    module = str(getattr(transform, "__module__", None) or type(cast(object, transform)).__module__)
    if isinstance(transform, Budgeted):
        budgeted = cast("Budgeted[In]", transform)
        runs = cast(Callable[[In], Out], budgeted.unbudgeted())

    def outcomes(
        items: list[tuple[str, In]], answers: list[Answer[_Outcome[Out]]]
    ) -> list[_Outcome[Out]]:
        found: list[_Outcome[Out]] = []
        for (key, record), answer in zip(items, answers, strict=True):
            if answer.value is not None:
                found.append(answer.value)
                continue
            error = answer.error or RuntimeError("no answer from its worker")
            reason = budgeted.stopped(record, error) if budgeted else failure_reason(error)[0]
            found.append(_Outcome(key, None, reason))
        return found

    keyed = _Keyed(runs)
    seconds = budgeted.budget_seconds if budgeted else None
    running: tuple[list[tuple[str, In]], Future[list[Answer[_Outcome[Out]]]]] | None = None
    for batch in _batches(keys, BATCH_DOCUMENTS * workers):
        items = list(load(batch))
        submitted = (items, submit_shared(workers, module, keyed, items, seconds))
        if running is not None:
            keep(outcomes(*_results(running)))
        running = submitted
    if running is not None:
        keep(outcomes(*_results(running)))


def _results(
    running: tuple[list[tuple[str, In]], "Future[list[Answer[_Outcome[Out]]]]"],
) -> tuple[list[tuple[str, In]], list[Answer[_Outcome[Out]]]]:
    return running[0], running[1].result()
