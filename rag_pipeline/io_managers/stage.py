"""IO manager for the intermediate stages (raw, markdown, sanitized, chunks): jsonb per document.

Storing follows Dagster's DbIOManager algorithm: the slice of the asset's partition is replaced
in one transaction. Loading is lazy: downstream gets every document's content hash and fetches
only the bodies it has to recompute, so an unchanged partition costs a hash comparison.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import dagster as dg

from rag_pipeline.core.incremental import StageOutput, StageRecord
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.store import runs, stages

# Dagster's standard key (TableMetadataSet's, which 1.13 does not export at top level).
PARTITION_ROW_COUNT = "dagster/partition_row_count"


@dataclass(frozen=True)
class StageView:
    """An upstream stage's documents in one partition, loaded on demand."""

    vectordb: VectorDBResource
    asset_key: str
    partition_key: str

    def content_hashes(self) -> dict[str, str]:
        """doc_key → content hash of every document the stage holds."""
        with self.vectordb.connect() as conn:
            return stages.stored_hashes(conn, self.asset_key, self.partition_key)[1]

    def load(self, doc_keys: Sequence[str]) -> Iterator[StageRecord]:
        """The records of the given documents."""
        with self.vectordb.connect() as conn:
            yield from stages.load_records(conn, self.asset_key, self.partition_key, doc_keys)


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


class StageIOManager(dg.ConfigurableIOManager):
    """Stores `StageOutput`s in `rag.stage_documents` and hands downstream a `StageView`."""

    vectordb: dg.ResourceDependency[VectorDBResource]

    def handle_output(self, context: dg.OutputContext, obj: StageOutput) -> None:
        """Replace the partition's slice of the stage with the output, with its failures."""
        partition_key = output_partition(context, obj.partition_key)
        asset_key = context.asset_key.to_user_string()
        with self.vectordb.connect() as conn, conn.transaction():
            stages.write_stage(conn, asset_key, obj, context.run_id)
            runs.record_errors(
                conn,
                run_id=context.run_id,
                source_type=obj.source_type,
                partition_key=partition_key,
                failures=obj.failed,
            )
        context.add_output_metadata({PARTITION_ROW_COUNT: len(obj.changed) + len(obj.kept)})

    def load_input(self, context: dg.InputContext) -> StageView:
        """A lazy view of the upstream stage's partition."""
        return StageView(
            self.vectordb, context.asset_key.to_user_string(), single_partition(context)
        )
