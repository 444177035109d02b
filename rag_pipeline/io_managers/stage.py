"""IO manager for the intermediate stages (raw, markdown, sanitized, chunks): jsonb per document.

A stage writes its own rows, batch by batch as it computes them, and completes its partition
itself (`orchestration/steps.py`): the stage is the one writer of its rows. The IO manager
only checks what a step hands over and loads lazily: downstream gets every document's content
hash and fetches only the bodies it has to recompute.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
import psycopg

from rag_pipeline.core.incremental import StageSummary
from rag_pipeline.core.records import ChunkedRecord, MarkdownRecord, RawRecord, SanitizedRecord
from rag_pipeline.core.stages import CHUNKS, MARKDOWN, RAW, SANITIZED, stored_name
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.store import stages

# Dagster's standard key (TableMetadataSet's, which 1.13 does not export at top level).
PARTITION_ROW_COUNT = "dagster/partition_row_count"
# Definition metadata of every chain asset: which source and stage it is, read here instead of
# being parsed back out of the asset key.
SOURCE_METADATA = "rag/source"
STAGE_METADATA = "rag/stage"
STAGE_RECORDS: dict[str, type[Any]] = {
    RAW: RawRecord,
    MARKDOWN: MarkdownRecord,
    SANITIZED: SanitizedRecord,
    CHUNKS: ChunkedRecord,
}


@dataclass
class StageOutput:
    """What a stage step hands its IO manager: a summary, never the documents themselves."""

    source_type: str
    partition_key: str
    summary: StageSummary


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

    def content_hashes(self, conn: psycopg.Connection | None = None) -> dict[str, str]:
        """doc key → content hash of every document of the partition the stage holds.

        On `conn` when given (the reading step's own connection), else on a new one.
        """
        if conn is not None:
            return stages.partition_hashes(
                conn, self.asset_key, self.source_type, self.partition_key
            )[1]
        with self.vectordb.connect() as own:
            return self.content_hashes(own)

    def load(
        self, keys: Sequence[str], conn: psycopg.Connection | None = None
    ) -> Iterator[tuple[str, Any]]:
        """`(key, record)` of the given documents, on `conn` when given, else on a new one."""
        if conn is not None:
            yield from stages.load_records(conn, self.asset_key, self.record_type, keys)
            return
        with self.vectordb.connect() as own:
            yield from self.load(keys, own)


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
    """Hands downstream a `StageView`; the stage step has written its rows itself."""

    vectordb: dg.ResourceDependency[VectorDBResource]

    def handle_output(self, context: dg.OutputContext, obj: StageOutput) -> None:
        """Check that the step's output is its partition's: its rows are stored already."""
        output_partition(context, obj.partition_key)

    def load_input(self, context: dg.InputContext) -> StageView:
        """A lazy view of the upstream stage's partition."""
        source, stage = source_of(context), stage_of(context)
        return StageView(
            self.vectordb, stored_name(source, stage), source, single_partition(context), stage
        )
