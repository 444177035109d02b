"""The pgvector IO manager: writes the searchable index of one partition in one transaction.

It follows Dagster's DbIOManager algorithm (slice by partition, replace, bulk load with binary
COPY after `register_vector`), made incremental: unchanged documents are declared, not
re-sent, and stay untouched; so re-materializing a partition never duplicates a row and a
failed run leaves the previous version fully searchable.
"""

from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from rag_pipeline.core.models import FailedDocument
from rag_pipeline.io_managers.stage import PARTITION_ROW_COUNT, output_partition, single_partition
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.store import index, runs
from rag_pipeline.store.index import IndexedDocument


@dataclass
class IndexOutput:
    """One partition's index: the documents to (re)write and the ones that stay as they are."""

    source_type: str
    partition_key: str
    documents: list[IndexedDocument] = field(default_factory=list)
    kept_doc_keys: set[str] = field(default_factory=set)
    failed: list[FailedDocument] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


class PgVectorIOManager(dg.ConfigurableIOManager):
    """Stores `IndexOutput`s in rag.documents / rag.sections / rag.chunks."""

    vectordb: dg.ResourceDependency[VectorDBResource]

    def handle_output(self, context: dg.OutputContext, obj: IndexOutput) -> None:
        """Replace the partition's slice of the index, record the run and its failures."""
        partition_key = output_partition(context, obj.partition_key)
        with self.vectordb.connect() as conn:
            with conn.transaction():
                written = index.replace_partition(
                    conn,
                    source_type=obj.source_type,
                    partition_key=partition_key,
                    documents=obj.documents,
                    kept_doc_keys=sorted(obj.kept_doc_keys),
                )
                runs.record_errors(
                    conn,
                    run_id=context.run_id,
                    source_type=obj.source_type,
                    partition_key=partition_key,
                    failures=obj.failed,
                )
                runs.record_run(
                    conn,
                    run_id=context.run_id,
                    source_type=obj.source_type,
                    partition_key=partition_key,
                    stats={**obj.stats, **written},
                )
            counts = index.partition_counts(conn, obj.source_type, partition_key)
        context.add_output_metadata(
            {
                PARTITION_ROW_COUNT: counts["chunks"],
                "documents_in_partition": counts["documents"],
                "sections_in_partition": counts["sections"],
            }
        )

    def load_input(self, context: dg.InputContext) -> dict[str, int]:
        """Row counts of the partition's index (what a downstream check needs)."""
        vectordb = self.vectordb
        with vectordb.connect() as conn:
            # The asset key is `<source>_embeddings`.
            source_type = context.asset_key.path[-1].removesuffix("_embeddings")
            return index.partition_counts(conn, source_type, single_partition(context))
