"""The incremental step every stage shares: decide which documents need work, do it, keep going.

A stage remembers, per document, the hash of the input it was computed from (the upstream
content hash combined with the stage's own settings fingerprint). A document whose input hash
is unchanged costs nothing; a document that fails keeps its previous output, so the previous
good version stays searchable while the failure is recorded.
"""

import logging
import multiprocessing
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rag_pipeline.core.ids import content_hash, stable_id
from rag_pipeline.core.models import FailedDocument

logger = logging.getLogger(__name__)

# Below this many documents a process pool costs more than it saves.
PARALLEL_MIN_DOCUMENTS = 200
_PARALLEL_BATCH = 32


@dataclass(frozen=True)
class StageRecord:
    """One document's output of a stage: JSON metadata and its main text."""

    doc_key: str
    meta: dict[str, Any]
    body: str

    @property
    def content_hash(self) -> str:
        """What downstream stages compare to see whether this record changed."""
        return content_hash(self.meta, self.body)


@dataclass(frozen=True)
class Plan:
    """Which documents a stage must compute now, and which it keeps as they are."""

    todo: dict[str, str]  # doc_key -> input hash
    kept: frozenset[str]


@dataclass
class StageOutput:
    """What a stage materializes for one partition.

    After it is stored, the partition holds exactly `changed` ∪ `kept`: every other document
    of the partition is gone (it disappeared upstream).
    """

    source_type: str
    partition_key: str
    changed: dict[str, tuple[str, StageRecord]] = field(default_factory=dict)
    kept: set[str] = field(default_factory=set)
    failed: list[FailedDocument] = field(default_factory=list)
    previous_keys: frozenset[str] = frozenset()

    @property
    def deleted(self) -> set[str]:
        """Documents stored before that this output no longer holds."""
        return set(self.previous_keys) - set(self.changed) - self.kept

    def counts(self) -> dict[str, int]:
        """New / changed / unchanged / deleted / failed document counts."""
        new = sum(1 for key in self.changed if key not in self.previous_keys)
        return {
            "new": new,
            "changed": len(self.changed) - new,
            "unchanged": len(self.kept - {f.source_id for f in self.failed}),
            "deleted": len(self.deleted),
            "failed": len(self.failed),
        }


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


@dataclass(frozen=True)
class _Outcome:
    """A transform's result for one document, or why it failed (picklable)."""

    doc_key: str
    result: StageRecord | None
    reason: str = ""
    trace: str = ""


def _apply(transform: Callable[[StageRecord], StageRecord], record: StageRecord) -> _Outcome:
    try:
        return _Outcome(record.doc_key, transform(record))
    except Exception as exc:  # one bad document must not stop the partition
        reason, expected = failure_reason(exc)
        return _Outcome(record.doc_key, None, reason, "" if expected else traceback.format_exc())


def _apply_batch(
    transform: Callable[[StageRecord], StageRecord], records: Sequence[StageRecord]
) -> list[_Outcome]:
    return [_apply(transform, record) for record in records]


def _outcomes(
    transform: Callable[[StageRecord], StageRecord],
    records: Iterable[StageRecord],
    workers: int,
) -> Iterator[_Outcome]:
    if workers <= 1:
        yield from (_apply(transform, record) for record in records)
        return
    batch = list(records)
    if len(batch) < PARALLEL_MIN_DOCUMENTS:
        yield from (_apply(transform, record) for record in batch)
        return
    # forkserver, not fork: the caller may be a multi-threaded process (the CLI runs the job
    # in a thread), and forking one can copy a lock another thread holds.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([transform.__module__])
    batches = [batch[i : i + _PARALLEL_BATCH] for i in range(0, len(batch), _PARALLEL_BATCH)]
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        for outcomes in pool.map(_apply_batch, [transform] * len(batches), batches):
            yield from outcomes


def run_stage(
    *,
    source_type: str,
    partition_key: str,
    stage: str,
    work: Plan,
    previous_inputs: Mapping[str, str],
    load: Callable[[list[str]], Iterable[StageRecord]],
    transform: Callable[[StageRecord], StageRecord],
    workers: int = 1,
) -> StageOutput:
    """Compute the planned documents; a failure is recorded, never fatal.

    With `workers` > 1 and enough documents, they are computed in that many processes;
    `transform` must then be a module-level function (it is pickled).
    """
    output = StageOutput(
        source_type=source_type,
        partition_key=partition_key,
        kept=set(work.kept),
        previous_keys=frozenset(previous_inputs),
    )
    for outcome in _outcomes(transform, load(sorted(work.todo)), workers):
        if outcome.result is None:
            if outcome.trace:
                # Not an input problem we expect: keep the traceback for whoever debugs it.
                logger.error("%s failed on %s:\n%s", stage, outcome.doc_key, outcome.trace)
            record_failure(output, outcome.doc_key, stage, outcome.reason, previous_inputs)
            continue
        output.changed[outcome.doc_key] = (work.todo[outcome.doc_key], outcome.result)
    return output


def failure_reason(error: BaseException) -> tuple[str, bool]:
    """A reason a person can act on, and whether it is an input problem we expect."""
    reason = str(error) or type(error).__name__
    if isinstance(error, ValueError | UnicodeError | OSError):
        return reason, True
    return f"{type(error).__name__}: {reason}", False


def record_failure(
    output: StageOutput,
    doc_key: str,
    stage: str,
    error: BaseException | str,
    previous_inputs: Mapping[str, str],
) -> None:
    """Mark a document failed; its previous output (if any) stays as it was."""
    if isinstance(error, BaseException):
        reason, expected = failure_reason(error)
        if not expected:
            logger.error("%s failed on %s", stage, doc_key, exc_info=error)
    else:
        reason = error
    output.failed.append(FailedDocument(source_id=doc_key, stage=stage, reason=reason))
    if doc_key in previous_inputs:
        output.kept.add(doc_key)
