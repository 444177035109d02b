"""IO manager for the intermediate stages (raw, markdown, sanitized, chunks): jsonb per document.

A stage writes its documents' rows batch by batch as it computes them (bounded memory: see
`core/incremental.py`); the IO manager then completes the partition in one transaction:
the raw stage's listing becomes the partition's membership, rows of documents no partition
lists any more are deleted, failures are recorded. Loading is lazy: downstream gets every
document's content hash and fetches only the bodies it has to recompute.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from rag_pipeline.core.incremental import StageSummary
from rag_pipeline.core.records import ChunkedRecord, MarkdownRecord, RawRecord, SanitizedRecord
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.store import runs, stages

# Dagster's standard key (TableMetadataSet's, which 1.13 does not export at top level).
PARTITION_ROW_COUNT = "dagster/partition_row_count"
# Definition metadata of every chain asset: which source and stage it is, read here instead of
# being parsed back out of the asset key.
SOURCE_METADATA = "rag/source"
STAGE_METADATA = "rag/stage"
STAGE_RECORDS: dict[str, type[Any]] = {
    "raw": RawRecord,
    "markdown": MarkdownRecord,
    "sanitized": SanitizedRecord,
    "chunks": ChunkedRecord,
}


@dataclass
class StageOutput:
    """What a stage step hands its IO manager: a summary, never the documents themselves.

    `members` is set by the raw stage only: every document the partition lists now.
    """

    source_type: str
    partition_key: str
    summary: StageSummary
    members: list[str] | None = None


@dataclass(frozen=True)
class StageView:
    """An upstream stage's documents in one partition, loaded on demand."""

    vectordb: VectorDBResource
    asset_key: str
    source_type: str
    partition_key: str
    stage: str

    @property
    def record_type(self) -> type[Any]:
        """The record class this stage stores."""
        return STAGE_RECORDS[self.stage]

    def content_hashes(self) -> dict[str, str]:
        """doc key → content hash of every document of the partition the stage holds."""
        with self.vectordb.connect() as conn:
            return stages.partition_hashes(
                conn, self.asset_key, self.source_type, self.partition_key
            )[1]

    def load(self, keys: Sequence[str]) -> Iterator[tuple[str, Any]]:
        """`(key, record)` of the given documents."""
        with self.vectordb.connect() as conn:
            yield from stages.load_records(conn, self.asset_key, self.record_type, keys)


def single_partition(context: dg.InputContext | dg.OutputContext) -> str:
    """The one partition a stage step works on (ranges are run one partition at a time)."""
    keys = list(context.asset_partition_keys)
    if len(keys) != 1:
        raise dg.DagsterInvariantViolationError(
            f"{context.asset_key.to_user_string()} processes one partition per run, got {len(keys)}"
        )
    return keys[0]


def output_partition(context: dg.OutputContext, declared: str) -> str:
    """The partition being stored, which must be the one the output says it belongs to."""
    partition_key = single_partition(context)
    if declared != partition_key:
        raise dg.DagsterInvariantViolationError(
            f"output of partition {declared!r} handed to partition {partition_key!r}"
        )
    return partition_key


def stage_definition_metadata(source_type: str, stage: str) -> dict[str, str]:
    """The definition metadata a chain asset declares: its source and its stage."""
    return {SOURCE_METADATA: source_type, STAGE_METADATA: stage}


def _declared(context: dg.InputContext | dg.OutputContext) -> dict[str, Any]:
    if isinstance(context, dg.InputContext):
        if context.upstream_output is None:
            raise dg.DagsterInvariantViolationError(f"{context.asset_key} has no upstream output")
        return dict(context.upstream_output.definition_metadata or {})
    return dict(context.definition_metadata or {})


def source_of(context: dg.InputContext | dg.OutputContext) -> str:
    """The source type of the chain asset stored or loaded (its definition metadata)."""
    return str(_declared(context)[SOURCE_METADATA])


def stage_of(context: dg.InputContext | dg.OutputContext) -> str:
    """The stage of the chain asset stored or loaded (its definition metadata)."""
    return str(_declared(context)[STAGE_METADATA])


class StageIOManager(dg.ConfigurableIOManager):
    """Completes a stage's partition in `rag.stage_documents`; hands downstream a `StageView`."""

    vectordb: dg.ResourceDependency[VectorDBResource]

    def handle_output(self, context: dg.OutputContext, obj: StageOutput) -> None:
        """Apply the listing, drop orphaned rows and record the failures, in one transaction."""
        partition_key = output_partition(context, obj.partition_key)
        asset_key = context.asset_key.to_user_string()
        orphaned = 0
        with self.vectordb.connect() as conn, conn.transaction():
            if obj.members is not None:
                orphaned = stages.set_partition_members(
                    conn, obj.source_type, partition_key, obj.members
                )
            stages.delete_orphans(conn, asset_key, obj.source_type)
            runs.record_errors(
                conn,
                run_id=context.run_id,
                source_type=obj.source_type,
                partition_key=partition_key,
                failures=obj.summary.failed,
            )
            rows = len(stages.partition_hashes(conn, asset_key, obj.source_type, partition_key)[0])
        metadata: dict[str, Any] = {PARTITION_ROW_COUNT: rows}
        if obj.members is not None:
            metadata["documents_deleted"] = orphaned
        context.add_output_metadata(metadata)

    def load_input(self, context: dg.InputContext) -> StageView:
        """A lazy view of the upstream stage's partition."""
        return StageView(
            self.vectordb,
            context.asset_key.to_user_string(),
            source_of(context),
            single_partition(context),
            stage_of(context),
        )
