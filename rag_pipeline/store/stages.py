"""Per-document stage rows (`rag.stage_documents`) and which partitions list each document.

A stage row is one document's output of one stage (raw, markdown, sanitized, chunks): lineage
in SQL and the state that makes every stage incremental. Rows are keyed by document, not by
partition: `rag.document_partitions` says which partitions list a document, and a document
that no partition lists any more is an orphan, deleted from every stage and the index.
"""

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.types.json import Jsonb

from rag_pipeline.core.records import (
    ChunkedRecord,
    MarkdownRecord,
    RawRecord,
    SanitizedRecord,
    record_from,
    record_meta_and_hash,
)

_BATCH = 500
# What jsonb cannot hold: NUL and lone surrogates.
_JSONB_UNSAFE = re.compile("[\x00\ud800-\udfff]")
R = TypeVar("R", RawRecord, MarkdownRecord, SanitizedRecord, ChunkedRecord)

# The rows of one stage whose document is listed by the given partition.
_IN_PARTITION = (
    " FROM rag.stage_documents s JOIN rag.document_partitions m"
    " ON m.source_type = %(source)s AND m.doc_key = s.doc_key AND m.partition_key = %(partition)s"
    " WHERE s.asset_key = %(asset)s"
)


def jsonb_safe(value: Any) -> Any:
    """Replace what jsonb cannot hold (NUL, lone surrogates) in every string of a JSON value."""
    if isinstance(value, str):
        # One regex scan in C: this runs on every string of every stage row.
        return _JSONB_UNSAFE.sub("\ufffd", value) if _JSONB_UNSAFE.search(value) else value
    if isinstance(value, dict):
        return {jsonb_safe(str(k)): jsonb_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonb_safe(v) for v in value]
    return value


def partition_hashes(
    conn: psycopg.Connection, asset_key: str, source_type: str, partition_key: str
) -> tuple[dict[str, str], dict[str, str]]:
    """(input hashes, content hashes) of a stage's documents that the partition lists."""
    rows = conn.execute(
        "SELECT s.doc_key, s.input_hash, s.content_hash" + _IN_PARTITION,
        {"asset": asset_key, "source": source_type, "partition": partition_key},
    ).fetchall()
    return {r[0]: r[1] for r in rows}, {r[0]: r[2] for r in rows}


def partition_size(
    conn: psycopg.Connection, asset_key: str, source_type: str, partition_key: str
) -> int:
    """How many rows of a stage the partition lists."""
    row = conn.execute(
        "SELECT count(*)" + _IN_PARTITION,
        {"asset": asset_key, "source": source_type, "partition": partition_key},
    ).fetchone()
    return int(row[0]) if row else 0


def input_hashes(conn: psycopg.Connection, asset_key: str, keys: Sequence[str]) -> dict[str, str]:
    """doc key → input hash of the given documents a stage holds (whatever partition)."""
    found: dict[str, str] = {}
    for start in range(0, len(keys), _BATCH * 10):
        rows = conn.execute(
            "SELECT doc_key, input_hash FROM rag.stage_documents"
            " WHERE asset_key = %s AND doc_key = ANY(%s)",
            (asset_key, list(keys[start : start + _BATCH * 10])),
        ).fetchall()
        found.update({r[0]: r[1] for r in rows})
    return found


def load_records(
    conn: psycopg.Connection, asset_key: str, record_type: type[R], keys: Sequence[str]
) -> Iterator[tuple[str, R]]:
    """The stored records of the given documents, fetched in batches."""
    for start in range(0, len(keys), _BATCH):
        rows = conn.execute(
            "SELECT doc_key, meta, body FROM rag.stage_documents"
            " WHERE asset_key = %s AND doc_key = ANY(%s) ORDER BY doc_key",
            (asset_key, list(keys[start : start + _BATCH])),
        ).fetchall()
        for doc_key, meta, body in rows:
            text = bytes(body).decode("utf-8", "surrogatepass")
            yield doc_key, record_from(record_type, meta, text)


def upsert_records(
    conn: psycopg.Connection,
    asset_key: str,
    rows: Iterable[tuple[str, str, RawRecord | MarkdownRecord | SanitizedRecord | ChunkedRecord]],
    run_id: str,
) -> None:
    """Store `(key, input hash, record)` rows of a stage, replacing older versions."""
    values: list[tuple[str, str, str, str, Jsonb, bytes, str]] = []
    for key, input_hash, record in rows:
        # One pydantic dump gives both the stored metadata and the content hash.
        meta, content_hash = record_meta_and_hash(record)
        body = record.body.encode("utf-8", "surrogatepass")
        values.append(
            (asset_key, key, input_hash, content_hash, Jsonb(jsonb_safe(meta)), body, run_id)
        )
    if not values:
        return
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO rag.stage_documents"
            " (asset_key, doc_key, input_hash, content_hash, meta, body, run_id)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (asset_key, doc_key) DO UPDATE SET"
            " input_hash = excluded.input_hash, content_hash = excluded.content_hash,"
            " meta = excluded.meta, body = excluded.body, run_id = excluded.run_id,"
            " updated_at = now()",
            values,
        )


def delete_orphans(conn: psycopg.Connection, asset_key: str, source_type: str) -> int:
    """Delete a stage's rows of documents no partition lists any more; return how many."""
    return conn.execute(
        "DELETE FROM rag.stage_documents s WHERE s.asset_key = %s AND NOT EXISTS ("
        " SELECT 1 FROM rag.document_partitions m"
        " WHERE m.source_type = %s AND m.doc_key = s.doc_key)",
        (asset_key, source_type),
    ).rowcount


def partition_members(conn: psycopg.Connection, source_type: str, partition_key: str) -> set[str]:
    """The documents a partition listed at its last run."""
    rows = conn.execute(
        "SELECT doc_key FROM rag.document_partitions WHERE source_type = %s AND partition_key = %s",
        (source_type, partition_key),
    ).fetchall()
    return {r[0] for r in rows}


def set_partition_members(
    conn: psycopg.Connection, source_type: str, partition_key: str, keys: Iterable[str]
) -> int:
    """Make the partition list exactly `keys`; return how many documents became orphans.

    Call it inside the transaction that also deletes the orphans' rows.
    """
    wanted = sorted(set(keys))
    dropped = conn.execute(
        "DELETE FROM rag.document_partitions WHERE source_type = %s AND partition_key = %s"
        " AND NOT (doc_key = ANY(%s)) RETURNING doc_key",
        (source_type, partition_key, wanted),
    ).fetchall()
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO rag.document_partitions (source_type, doc_key, partition_key)"
            " VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
            [(source_type, key, partition_key) for key in wanted],
        )
    if not dropped:
        return 0
    still_listed = conn.execute(
        "SELECT count(DISTINCT doc_key) FROM rag.document_partitions"
        " WHERE source_type = %s AND doc_key = ANY(%s)",
        (source_type, [r[0] for r in dropped]),
    ).fetchone()
    return len(dropped) - int(still_listed[0] if still_listed else 0)
