"""Document lineage at each index write: history rows and the materialization's document table.

The pgvector IO manager calls `record_index_write` once per partition, inside its transaction,
after the documents are written: the written documents become new versions
(`store/history.py`), and the materialization's metadata lists the documents the write added,
changed, deleted or failed, so a user can go from a run to its documents in the UI (and from
a document to its runs with `rag show`).
"""

from collections.abc import Sequence
from typing import Any, Final, Protocol

import dagster as dg
import psycopg

from rag_pipeline.core import document_stages
from rag_pipeline.core.models import FailedDocument
from rag_pipeline.settings import Settings
from rag_pipeline.store import history
from rag_pipeline.store.history import DocumentChange
from rag_pipeline.store.indexing import EMBEDDINGS_VERSION

# Rows of the materialization's document table; the full list is in `rag show`/`rag status`.
TABLE_ROWS: Final = 50
DOCUMENTS_METADATA: Final = "documents"


class WrittenIndex(Protocol):
    """What the IO manager wrote (an `IndexOutput`)."""

    source_type: str
    ready: dict[str, str]
    failed: list[FailedDocument]
    computed: set[str]


def stage_code_versions() -> dict[str, str]:
    """The code version of every stage of a source's chain, raw to embeddings."""
    return {
        "raw": document_stages.RAW_VERSION,
        **document_stages.code_versions(),
        "embeddings": EMBEDDINGS_VERSION,
    }


def record_index_write(
    conn: psycopg.Connection, run_id: str, written: WrittenIndex, settings: Settings
) -> dict[str, Any]:
    """Record the written documents' versions; return the materialization's metadata entries."""
    changes = history.record_versions(
        conn,
        run_id=run_id,
        source_type=written.source_type,
        keys=sorted(written.ready),
        computed=written.computed,
        code_versions=stage_code_versions(),
        keep=settings.history_versions,
    )
    changes += history.deleted_documents(conn, written.source_type)
    changes += [_failure(f) for f in written.failed]
    if not changes:
        return {}
    return {DOCUMENTS_METADATA: documents_table(changes)}


def _failure(failed: FailedDocument) -> DocumentChange:
    # A failure names the document by its key (`<source id>[@<language>]`), shown as it is.
    return DocumentChange("failed", failed.source_id, "", "", f"{failed.stage}: {failed.reason}")


def documents_table(changes: Sequence[DocumentChange]) -> dg.TableMetadataValue:
    """At most TABLE_ROWS documents as a table; a last row counts the ones left out."""
    records = [
        dg.TableRecord(
            {
                "change": c.change,
                "source_id": c.source_id,
                "language": c.language,
                "version": c.source_version,
                "reason": c.reason.replace("\n", " ")[:300],
            }
        )
        for c in changes[:TABLE_ROWS]
    ]
    if len(changes) > TABLE_ROWS:
        more = f"{len(changes) - TABLE_ROWS} more: `rag status`, `rag show SOURCE_ID`"
        records.append(
            dg.TableRecord(
                {"change": "…", "source_id": more, "language": "", "version": "", "reason": ""}
            )
        )
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn("change", "string", description="added, changed, deleted, failed"),
            dg.TableColumn("source_id", "string"),
            dg.TableColumn("language", "string"),
            dg.TableColumn("version", "string", description="the source's version indexed"),
            dg.TableColumn("reason", "string", description="why it failed"),
        ]
    )
    return dg.MetadataValue.table(records=records, schema=schema)
