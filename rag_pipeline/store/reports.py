"""What `rag status` and run summaries read: counts per source, last runs, a run's stats."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import psycopg
from psycopg.types.json import Jsonb

from rag_pipeline.core.stages import RAW, stored_name, stored_names


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
        conn.execute(
            "DELETE FROM rag.stage_documents WHERE asset_key = ANY(%s)",
            (list(stored_names(source_type)),),
        )
    return documents


@dataclass(frozen=True)
class SourceFreshness:
    """How current one source's index is: its last sync and what is not indexed."""

    source_type: str
    last_sync: datetime | None
    partitions: int
    documents: int
    chunks: int
    failed_documents: int
    documents_behind: int


@dataclass(frozen=True)
class CurrentFailure:
    """A document that failed in the newest run of its partition."""

    source_type: str
    partition_key: str
    source_id: str
    stage: str
    reason: str
    failed_at: datetime


@dataclass(frozen=True)
class IndexSize:
    """The size of the index on disk (tables with their indexes and TOAST)."""

    documents: int
    chunks: int
    index_bytes: int
    database_bytes: int


# The newest run of each partition; what it recorded is the current state of that partition.
_LATEST_RUNS: Final = (
    "SELECT DISTINCT ON (source_type, partition_key) run_id, source_type, partition_key,"
    " finished_at FROM rag.ingest_runs ORDER BY source_type, partition_key, finished_at DESC"
)


def current_failures(conn: psycopg.Connection, limit: int = 200) -> list[CurrentFailure]:
    """Failed documents of every source, as the newest run of each partition left them."""
    rows = conn.execute(
        f"WITH latest AS ({_LATEST_RUNS})"
        " SELECT DISTINCT ON (e.source_type, e.source_id, e.stage) e.source_type,"
        " e.partition_key, e.source_id, e.stage, e.reason, e.created_at"
        " FROM rag.ingest_errors e JOIN latest l ON l.run_id = e.run_id"
        " AND l.source_type = e.source_type AND l.partition_key = e.partition_key"
        " ORDER BY e.source_type, e.source_id, e.stage, e.created_at DESC LIMIT %s",
        (limit,),
    ).fetchall()
    return [CurrentFailure(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]


def source_freshness(conn: psycopg.Connection) -> list[SourceFreshness]:
    """Per source: last successful sync, partitions, documents, chunks, failed and behind.

    A document is *behind* when its source gave a version (the raw stage row) newer than the
    one in the index: fetched but not (yet) indexed, e.g. rejected by a check, or in a run
    that has not finished.
    """
    sources = conn.execute(
        "SELECT source_type FROM rag.ingest_runs UNION SELECT source_type FROM rag.documents"
    ).fetchall()
    # Each source's raw stage by its stored name, named here: SQL does not build names.
    raw = {str(r[0]): stored_name(str(r[0]), RAW) for r in sources}
    rows = conn.execute(
        f"WITH latest AS ({_LATEST_RUNS}),"
        " sources AS (SELECT source_type FROM rag.ingest_runs"
        "  UNION SELECT source_type FROM rag.documents)"
        " SELECT s.source_type,"
        " (SELECT max(finished_at) FROM latest l WHERE l.source_type = s.source_type),"
        " (SELECT count(*) FROM latest l WHERE l.source_type = s.source_type),"
        " (SELECT count(*) FROM rag.documents d WHERE d.source_type = s.source_type),"
        " (SELECT count(*) FROM rag.chunks c WHERE c.source_type = s.source_type),"
        " (SELECT count(DISTINCT e.source_id) FROM rag.ingest_errors e JOIN latest l"
        "   ON l.run_id = e.run_id AND l.source_type = e.source_type"
        "   AND l.partition_key = e.partition_key WHERE e.source_type = s.source_type),"
        " (SELECT count(*) FROM rag.stage_documents r"
        "   WHERE r.asset_key = %(raw)s::jsonb ->> s.source_type"
        "   AND NOT EXISTS (SELECT 1 FROM rag.documents d WHERE d.source_type = s.source_type"
        "   AND d.doc_key = r.doc_key AND d.ingested_at >= r.updated_at))"
        " FROM sources s ORDER BY s.source_type",
        {"raw": Jsonb(raw)},
    ).fetchall()
    return [
        SourceFreshness(r[0], r[1], int(r[2]), int(r[3]), int(r[4]), int(r[5]), int(r[6]))
        for r in rows
    ]


def index_size(conn: psycopg.Connection) -> IndexSize:
    """Documents, chunks and bytes of the index tables and of the whole database."""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM rag.documents), (SELECT count(*) FROM rag.chunks),"
        " (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
        "  JOIN pg_namespace n ON n.oid = c.relnamespace"
        "  WHERE n.nspname = 'rag' AND c.relkind IN ('r', 'p', 'm')),"
        " pg_database_size(current_database())"
    ).fetchone()
    assert row is not None
    return IndexSize(int(row[0]), int(row[1]), int(row[2]), int(row[3]))


def server_version(conn: psycopg.Connection) -> str:
    """The server's `server_version` (e.g. `18.1`)."""
    row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "unknown"


def extension_versions(conn: psycopg.Connection) -> dict[str, str]:
    """Installed extensions of the current database and their versions."""
    rows = conn.execute("SELECT extname, extversion FROM pg_extension ORDER BY extname").fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def table_exists(conn: psycopg.Connection, name: str) -> bool:
    """True if a table of that name (any schema on the search path, case-insensitive) exists."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name.lower(),)).fetchone()
    return bool(row and row[0])


def indexed_source_ids(conn: psycopg.Connection, source_type: str, language: str) -> set[str]:
    """The source ids of a source's indexed documents in one language."""
    rows = conn.execute(
        "SELECT source_id FROM rag.documents WHERE source_type = %s AND language = %s",
        (source_type, language),
    ).fetchall()
    return {r[0] for r in rows}
