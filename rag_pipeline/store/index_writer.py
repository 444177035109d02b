"""The one writer of the searchable index: a partition's documents, in one transaction.

It follows Dagster's DbIOManager algorithm (slice by partition, replace, bulk load with binary
COPY after `register_vector`), made incremental: unchanged documents are not re-sent and stay
untouched, changed ones are written as the embeddings step hands them over (a stream of index
rows built as it reads and embeds, so memory stays bounded), documents no partition lists any
more are deleted. Then, in the same transaction, the written documents become new versions
(`store/history.py`), the run's failures and summary are recorded, and the partition's counts
are read. A failed write leaves the previous version fully searchable; writing again never
duplicates a row.

No Dagster here. The embeddings step drives a `PartitionWriter` in two explicit calls: `write`
consumes the stream, then `finish` records what the step reports once the stream is done (the
documents ready, the failures, the texts it embedded). `finish` refuses to run before `write`.
"""

import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import Any

import psycopg

from rag_pipeline.core import document_stages
from rag_pipeline.core.models import FailedDocument
from rag_pipeline.store import history, index, runs
from rag_pipeline.store.history import DocumentChange
from rag_pipeline.store.index import IndexedDocument
from rag_pipeline.store.indexing import EMBEDDINGS_VERSION
from rag_pipeline.store.locks import lock_key

# Documents copied together inside the transaction: bounds memory.
WRITE_BATCH = 128


@dataclass(frozen=True)
class IndexWrite:
    """What one partition's write did; complete once `PartitionWriter.finish` returns."""

    documents_written: int
    chunks_written: int
    documents_deleted: int
    counts: Mapping[str, int]  # documents, sections and chunks the partition lists now
    changes: Sequence[DocumentChange]  # added, changed, deleted and failed documents
    write_seconds: float  # COPY of the rows (the stream's own work excluded)
    record_seconds: float  # versions, failures, run summary and counts


def stage_code_versions() -> dict[str, str]:
    """The code version of every stage of a source's chain, raw to embeddings."""
    return {
        "raw": document_stages.RAW_VERSION,
        **document_stages.code_versions(),
        "embeddings": EMBEDDINGS_VERSION,
    }


class PartitionWriter:
    """One partition's write, inside the transaction `partition_writer` opened."""

    def __init__(
        self, conn: psycopg.Connection, source_type: str, partition_key: str, run_id: str
    ) -> None:
        self._conn = conn
        self.source_type = source_type
        self.partition_key = partition_key
        self.run_id = run_id
        self._deleted = 0
        self._documents = 0
        self._chunks = 0
        self._write_seconds = 0.0
        self._written = False

    def delete_orphans(self) -> None:
        """Delete the source's documents no partition lists any more."""
        self._deleted = index.delete_orphans(self._conn, self.source_type)

    def write(self, documents: Iterable[IndexedDocument]) -> None:
        """Replace the stored versions of the streamed documents, a batch at a time."""
        iterator = iter(documents)
        # Taking a batch runs the stream's own work (reading, embedding) for its documents.
        while batch := list(islice(iterator, WRITE_BATCH)):
            started = time.perf_counter()
            index.write_documents(self._conn, batch)
            self._write_seconds += time.perf_counter() - started
            self._documents += len(batch)
            self._chunks += sum(len(d.chunks) for d in batch)
        self._written = True

    def finish(
        self,
        *,
        ready: Collection[str],
        failed: Sequence[FailedDocument],
        computed: Collection[str],
        stats: Mapping[str, Any],
        keep_versions: int,
    ) -> IndexWrite:
        """Record the written documents' versions, the failures and the run; count the rows.

        `ready` are the keys of the documents written (their stream is consumed), `computed`
        the sha256 of the chunk texts this run embedded, `stats` the run's summary.
        """
        if not self._written:
            raise RuntimeError("PartitionWriter.finish before write: the stream is not written")
        started = time.perf_counter()
        changes = history.record_versions(
            self._conn,
            run_id=self.run_id,
            source_type=self.source_type,
            keys=sorted(ready),
            computed=computed,
            code_versions=stage_code_versions(),
            keep=keep_versions,
        )
        changes += history.deleted_documents(self._conn, self.source_type)
        changes += [_failure(f) for f in failed]
        runs.record_errors(
            self._conn,
            run_id=self.run_id,
            source_type=self.source_type,
            partition_key=self.partition_key,
            failures=failed,
        )
        runs.record_run(
            self._conn,
            run_id=self.run_id,
            source_type=self.source_type,
            partition_key=self.partition_key,
            stats={**stats, "documents_deleted": self._deleted},
        )
        counts = index.partition_counts(self._conn, self.source_type, self.partition_key)
        return IndexWrite(
            documents_written=self._documents,
            chunks_written=self._chunks,
            documents_deleted=self._deleted,
            counts=counts,
            changes=changes,
            write_seconds=self._write_seconds,
            record_seconds=time.perf_counter() - started,
        )


@contextmanager
def partition_writer(
    conn: psycopg.Connection, source_type: str, partition_key: str, run_id: str
) -> Iterator[PartitionWriter]:
    """A writer of one partition, in a transaction that commits when the block ends.

    Two partitions may list one document: their writes to the source take turns.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("index", source_type),))
        writer = PartitionWriter(conn, source_type, partition_key, run_id)
        writer.delete_orphans()
        yield writer


def _failure(failed: FailedDocument) -> DocumentChange:
    # A failure names the document by its key (`<source id>[@<language>]`), shown as it is.
    return DocumentChange("failed", failed.source_id, "", "", f"{failed.stage}: {failed.reason}")
