"""Per-document stage rows (`rag.stage_documents`): lineage in SQL and incremental state."""

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from rag_pipeline.core.incremental import StageOutput, StageRecord

_BATCH = 500


def jsonb_safe(value: Any) -> Any:
    """Replace what jsonb cannot hold (NUL, lone surrogates) in every string of a JSON value."""
    if isinstance(value, str):
        if "\x00" in value or any("\ud800" <= ch <= "\udfff" for ch in value):
            return "".join(
                "\ufffd" if ch == "\x00" or "\ud800" <= ch <= "\udfff" else ch for ch in value
            )
        return value
    if isinstance(value, dict):
        return {jsonb_safe(str(k)): jsonb_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonb_safe(v) for v in value]
    return value


def stored_hashes(
    conn: psycopg.Connection, asset_key: str, partition_key: str
) -> tuple[dict[str, str], dict[str, str]]:
    """(input hashes, content hashes) of the documents a stage holds for a partition."""
    rows = conn.execute(
        "SELECT doc_key, input_hash, content_hash FROM rag.stage_documents"
        " WHERE asset_key = %s AND partition_key = %s",
        (asset_key, partition_key),
    ).fetchall()
    return {r[0]: r[1] for r in rows}, {r[0]: r[2] for r in rows}


def load_records(
    conn: psycopg.Connection, asset_key: str, partition_key: str, doc_keys: Sequence[str]
) -> Iterator[StageRecord]:
    """The stored records of the given documents, fetched in batches."""
    for start in range(0, len(doc_keys), _BATCH):
        batch = list(doc_keys[start : start + _BATCH])
        rows = conn.execute(
            "SELECT doc_key, meta, body FROM rag.stage_documents"
            " WHERE asset_key = %s AND partition_key = %s AND doc_key = ANY(%s)"
            " ORDER BY doc_key",
            (asset_key, partition_key, batch),
        ).fetchall()
        for doc_key, meta, body in rows:
            yield StageRecord(doc_key, meta, bytes(body).decode("utf-8", "surrogatepass"))


def write_stage(conn: psycopg.Connection, asset_key: str, output: StageOutput, run_id: str) -> None:
    """Make the partition's rows exactly `changed` ∪ `kept`, in one transaction."""
    keep = sorted(set(output.changed) | output.kept)
    with conn.transaction():
        conn.execute(
            "DELETE FROM rag.stage_documents WHERE asset_key = %s AND partition_key = %s"
            " AND NOT (doc_key = ANY(%s))",
            (asset_key, output.partition_key, keep),
        )
        rows: Iterable[tuple[object, ...]] = (
            (
                asset_key,
                output.partition_key,
                key,
                input_hash,
                record.content_hash,
                Jsonb(jsonb_safe(record.meta)),
                record.body.encode("utf-8", "surrogatepass"),
                run_id,
            )
            for key, (input_hash, record) in sorted(output.changed.items())
        )
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO rag.stage_documents"
                " (asset_key, partition_key, doc_key, input_hash, content_hash, meta, body, run_id)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (asset_key, partition_key, doc_key) DO UPDATE SET"
                " input_hash = excluded.input_hash, content_hash = excluded.content_hash,"
                " meta = excluded.meta, body = excluded.body, run_id = excluded.run_id,"
                " updated_at = now()",
                rows,
            )
