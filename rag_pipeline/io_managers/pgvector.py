"""The pgvector IO manager: writes the searchable index of one partition in one transaction.

It follows Dagster's DbIOManager algorithm (slice by partition, replace, bulk load with binary
COPY after `register_vector`), made incremental: unchanged documents are not re-sent and stay
untouched, changed ones are written as the embeddings step hands them over (a stream of index
rows with their vectors, built as the step reads and embeds), documents no partition lists
any more are deleted. A failed run leaves the previous version fully searchable;
re-materializing never duplicates a row. This is the only writer of the index tables.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import dagster as dg

from rag_pipeline.core.models import FailedDocument
from rag_pipeline.io_managers import lineage
from rag_pipeline.io_managers.stage import PARTITION_ROW_COUNT, output_partition, source_of
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.store import index, runs
from rag_pipeline.store.index import IndexedDocument
from rag_pipeline.store.indexing import cached_documents, stage_records
from rag_pipeline.store.locks import lock_key

# Documents copied together inside the transaction: bounds memory.
_WRITE_BATCH = 128


@dataclass
class IndexOutput:
    """One partition's index: the documents to (re)write, and what the run did.

    `documents` is the embeddings step's stream of index rows, consumed once by the IO
    manager; `ready`, `failed`, `stats` and `metadata` are complete once it is exhausted.
    Without a stream, the `ready` documents are built from the chunks stage and the vectors
    the cache holds for them (nothing is embedded then).
    """

    source_type: str
    partition_key: str
    chunks_asset: str
    model_id: str
    second_model_id: str | None = None  # the multilingual model of the second vector
    ready: dict[str, str] = field(default_factory=lambda: {})  # key -> input hash
    failed: list[FailedDocument] = field(default_factory=lambda: [])
    stats: dict[str, Any] = field(default_factory=lambda: {})
    computed: set[str] = field(default_factory=lambda: set())  # texts embedded by this run
    documents: Iterable[IndexedDocument] | None = None
    metadata: dict[str, Any] = field(default_factory=lambda: {})


class PgVectorIOManager(dg.ConfigurableIOManager):
    """Stores `IndexOutput`s in rag.documents / rag.sections / rag.chunks."""

    vectordb: dg.ResourceDependency[VectorDBResource]

    def handle_output(self, context: dg.OutputContext, obj: IndexOutput) -> None:
        """Update the partition's slice of the index, record the run and its failures."""
        partition_key = output_partition(context, obj.partition_key)
        with self.vectordb.connect() as conn, conn.transaction():
            # Two partitions may list one document: their writes to it take turns.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("index", obj.source_type),))
            deleted = index.delete_orphans(conn, obj.source_type)
            documents = (
                obj.documents
                if obj.documents is not None
                else cached_documents(
                    conn,
                    stage_records(conn, obj.chunks_asset, obj.ready),
                    obj.model_id,
                    obj.second_model_id,
                )
            )
            for batch in _batches(documents, _WRITE_BATCH):
                index.write_documents(conn, batch)
            stats = {**obj.stats, "documents_deleted": deleted}
            # After the writes: the stream has embedded what it had to (obj.computed is full).
            changes = lineage.record_index_write(
                conn, context.run_id, obj, self.vectordb.settings()
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
                stats=stats,
            )
            counts = index.partition_counts(conn, obj.source_type, partition_key)
        context.add_output_metadata(
            {
                **obj.metadata,
                PARTITION_ROW_COUNT: counts["chunks"],
                "documents_deleted": deleted,
                "documents_in_partition": counts["documents"],
                "sections_in_partition": counts["sections"],
                **changes,
            }
        )

    def load_input(self, context: dg.InputContext) -> dict[str, int]:
        """Row counts of the partition's index (what a downstream check needs)."""
        with self.vectordb.connect() as conn:
            source_type = source_of(context)
            return index.partition_counts(conn, source_type, context.asset_partition_key)


def _batches(documents: Iterable[IndexedDocument], size: int) -> Iterator[list[IndexedDocument]]:
    iterator = iter(documents)
    while batch := list(islice(iterator, size)):
        yield batch
