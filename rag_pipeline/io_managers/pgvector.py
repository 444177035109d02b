"""The pgvector IO manager: reports what the embeddings step wrote to the index, and loads it.

The embeddings step writes its partition's index itself, through the one writer of the index
tables (`store/index_writer.py`), as the four stages before it write their rows: the model runs
in the step, and what the step hands over here is complete. This IO manager checks that the
output is its partition's, turns the write into the materialization's metadata (the row counts
Dagster plots, the documents added, changed, deleted or failed) and hands downstream checks the
partition's row counts.
"""

from dataclasses import dataclass

import dagster as dg

from rag_pipeline.io_managers.lineage import write_metadata
from rag_pipeline.io_managers.stage import output_partition, source_of
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.store import index
from rag_pipeline.store.index_writer import IndexWrite


@dataclass(frozen=True)
class IndexOutput:
    """One partition's index as the embeddings step wrote it."""

    source_type: str
    partition_key: str
    written: IndexWrite


class PgVectorIOManager(dg.ConfigurableIOManager):
    """Reports `IndexOutput`s; loads a partition's row counts of rag.documents / sections /
    chunks."""

    vectordb: dg.ResourceDependency[VectorDBResource]

    def handle_output(self, context: dg.OutputContext, obj: IndexOutput) -> None:
        """Check the output is the partition's; record what was written as its metadata."""
        output_partition(context, obj.partition_key)
        context.add_output_metadata(write_metadata(obj.written))

    def load_input(self, context: dg.InputContext) -> dict[str, int]:
        """Row counts of the partition's index (what a downstream check needs)."""
        with self.vectordb.connect() as conn:
            source_type = source_of(context)
            return index.partition_counts(conn, source_type, context.asset_partition_key)
