"""Run summaries and the append-only per-document error log."""

from collections.abc import Iterable
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from rag_pipeline.core.models import FailedDocument


def record_errors(
    conn: psycopg.Connection,
    *,
    run_id: str,
    source_type: str,
    partition_key: str,
    failures: Iterable[FailedDocument],
) -> None:
    """Append this run's failures (callers run it inside their write transaction)."""
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO rag.ingest_errors (run_id, source_type, partition_key, source_id,"
            " stage, reason) VALUES (%s, %s, %s, %s, %s, %s)",
            [
                (run_id, source_type, partition_key, f.source_id, f.stage, f.reason)
                for f in failures
            ],
        )


def record_run(
    conn: psycopg.Connection,
    *,
    run_id: str,
    source_type: str,
    partition_key: str,
    stats: dict[str, Any],
) -> None:
    """Store the summary of one run of one partition."""
    conn.execute(
        "INSERT INTO rag.ingest_runs (run_id, source_type, partition_key, stats)"
        " VALUES (%s, %s, %s, %s) ON CONFLICT (run_id, source_type, partition_key)"
        " DO UPDATE SET stats = excluded.stats, finished_at = now()",
        (run_id, source_type, partition_key, Jsonb(stats)),
    )


def run_errors(conn: psycopg.Connection, run_id: str) -> list[tuple[str, str, str, str]]:
    """(partition, source_id, stage, reason) of every failure of a run."""
    rows = conn.execute(
        "SELECT partition_key, source_id, stage, reason FROM rag.ingest_errors"
        " WHERE run_id = %s ORDER BY id",
        (run_id,),
    ).fetchall()
    return [(r[0], r[1], r[2], r[3]) for r in rows]
