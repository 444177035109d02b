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
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from rag_pipeline.core.ids import stable_id
from rag_pipeline.core.models import FailedDocument
from rag_pipeline.core.workers import worker_pool

logger = logging.getLogger(__name__)

# Below this many documents a process pool costs more than it saves.
PARALLEL_MIN_DOCUMENTS = 200
# Documents loaded, transformed and stored together: bounds a stage's memory.
BATCH_DOCUMENTS = 64
_PARALLEL_CHUNK = 16

In = TypeVar("In")
Out = TypeVar("Out")


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


def _pool(workers: int) -> Executor:
    # Spawned workers that exit when this process dies, even by SIGKILL (core/workers.py).
    return worker_pool(workers)


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
    it returns one, fails that document alone. With `workers` > 1 and enough documents, the
    transform runs in that many processes (`transform` is then pickled).
    """
    summary = StageSummary(stage=stage, kept=set(work.kept))
    keys = sorted(work.todo)
    parallel = workers > 1 and len(keys) >= PARALLEL_MIN_DOCUMENTS
    pool = _pool(workers) if parallel else None
    try:
        for batch in _batches(keys, BATCH_DOCUMENTS * (workers if parallel else 1)):
            items = list(load(batch))
            if pool is not None:
                chunks = [
                    items[i : i + _PARALLEL_CHUNK] for i in range(0, len(items), _PARALLEL_CHUNK)
                ]
                outcomes = [
                    o
                    for group in pool.map(_apply_batch, [transform] * len(chunks), chunks)
                    for o in group
                ]
            else:
                outcomes = _apply_batch(transform, items)
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
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return summary
