"""Document lineage in the UI: the materialization metadata of each index write.

The index writer (`store/index_writer.py`) records the written documents as new versions in
the write's transaction (`store/history.py`). The pgvector IO manager turns what it wrote into
metadata: the row counts, and a table of the documents the write added, changed, deleted or
failed, so a user can go from a run to its documents in the UI (and from a document to its
runs with `rag show`).
"""

from collections.abc import Sequence
from typing import Any, Final

import dagster as dg

from rag_pipeline.io_managers.stage import PARTITION_ROW_COUNT
from rag_pipeline.store.history import DocumentChange
from rag_pipeline.store.index_writer import IndexWrite

# Rows of the materialization's document table; the full list is in `rag show`/`rag status`.
TABLE_ROWS: Final = 50
DOCUMENTS_METADATA: Final = "documents"


def write_metadata(written: IndexWrite) -> dict[str, Any]:
    """The materialization metadata of a partition's index write."""
    metadata: dict[str, Any] = {
        PARTITION_ROW_COUNT: written.counts["chunks"],
        "documents_deleted": written.documents_deleted,
        "documents_in_partition": written.counts["documents"],
        "sections_in_partition": written.counts["sections"],
    }
    if written.changes:
        metadata[DOCUMENTS_METADATA] = documents_table(written.changes)
    return metadata


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
