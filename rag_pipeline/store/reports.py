"""What `rag status` and run summaries read: counts per source, last runs, a run's stats."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg


@dataclass(frozen=True)
class LastRun:
    """The newest run of one partition of a source."""

    source_type: str
    partition_key: str
    finished_at: datetime
    run_id: str
    failed_documents: int


def index_counts(conn: psycopg.Connection) -> list[tuple[str, str, int, int]]:
    """(source type, language, documents, chunks) of the whole index."""
    rows = conn.execute(
        "SELECT d.source_type, d.language, count(DISTINCT d.id), count(c.id)"
        " FROM rag.documents d LEFT JOIN rag.chunks c ON c.document_id = d.id"
        " GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    return [(r[0], r[1], int(r[2]), int(r[3])) for r in rows]


def last_runs(conn: psycopg.Connection) -> list[LastRun]:
    """The newest run of every partition of every source, with its failed documents."""
    rows = conn.execute(
        "SELECT r.source_type, r.partition_key, r.finished_at, r.run_id,"
        " (SELECT count(DISTINCT e.source_id) FROM rag.ingest_errors e"
        "  WHERE e.run_id = r.run_id AND e.source_type = r.source_type"
        "  AND e.partition_key = r.partition_key)"
        " FROM (SELECT DISTINCT ON (source_type, partition_key) * FROM rag.ingest_runs"
        "  ORDER BY source_type, partition_key, finished_at DESC) r"
        " ORDER BY r.source_type, r.partition_key"
    ).fetchall()
    return [LastRun(r[0], r[1], r[2], r[3], int(r[4])) for r in rows]


def run_stats(conn: psycopg.Connection, run_id: str) -> dict[str, Any]:
    """The embeddings stage's summary of a run (empty if it did not get that far)."""
    row = conn.execute(
        "SELECT stats FROM rag.ingest_runs WHERE run_id = %s ORDER BY finished_at DESC LIMIT 1",
        (run_id,),
    ).fetchone()
    return dict(row[0]) if row else {}


def clear_source(conn: psycopg.Connection, source_type: str) -> int:
    """Delete every document, stage row and partition listing of a source; return documents."""
    with conn.transaction():
        documents = conn.execute(
            "DELETE FROM rag.documents WHERE source_type = %s", (source_type,)
        ).rowcount
        conn.execute("DELETE FROM rag.document_partitions WHERE source_type = %s", (source_type,))
        # The stage assets of a source are exactly `<source>_<stage>` for the chain's stages.
        conn.execute(
            "DELETE FROM rag.stage_documents WHERE asset_key = ANY(%s)",
            ([f"{source_type}_{stage}" for stage in ("raw", "markdown", "sanitized", "chunks")],),
        )
    return documents
