"""The searchable index: documents, sections (parents) and chunks with their vectors.

`replace_partition` is the DbIOManager algorithm made incremental: in one transaction, the
partition's slice ends up holding exactly the documents the run declared (changed ones
re-inserted with binary COPY, unchanged ones untouched, vanished ones deleted), so a run that
dies half-way changes nothing and a re-run never duplicates.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg.types.json import Jsonb

from rag_pipeline.store.stages import jsonb_safe


@dataclass(frozen=True)
class SectionRow:
    """A parent section as stored."""

    id: str
    ordinal: int
    title: str
    heading_path: list[str]
    text: str
    start_char: int
    end_char: int


@dataclass(frozen=True)
class ChunkRow:
    """A chunk as stored, with its vector."""

    id: str
    section_id: str
    ordinal: int
    heading: str
    text: str
    embedded_text: str
    token_count: int
    start_char: int
    end_char: int
    text_sha256: str
    embedding: NDArray[np.float32]


@dataclass(frozen=True)
class IndexedDocument:
    """One document ready for the index: its row, its parents and its chunks."""

    id: str
    source_type: str
    partition_key: str
    doc_key: str
    source_id: str
    language: str
    title: str
    breadcrumb: str
    url: str
    original_format: str
    source_version: str
    content_hash: str
    input_hash: str
    sanitizer_version: str
    chunker_fingerprint: str
    model_id: str
    ts_config: str
    metadata: dict[str, Any]
    body: str
    sections: list[SectionRow] = field(default_factory=list)
    chunks: list[ChunkRow] = field(default_factory=list)


def stored_inputs(conn: psycopg.Connection, source_type: str, partition_key: str) -> dict[str, str]:
    """doc_key → input hash of the documents the index holds for a partition."""
    rows = conn.execute(
        "SELECT doc_key, input_hash FROM rag.documents"
        " WHERE source_type = %s AND partition_key = %s",
        (source_type, partition_key),
    ).fetchall()
    return {r[0]: r[1] for r in rows}


def replace_partition(
    conn: psycopg.Connection,
    *,
    source_type: str,
    partition_key: str,
    documents: Sequence[IndexedDocument],
    kept_doc_keys: Sequence[str],
) -> dict[str, int]:
    """Make the partition hold exactly `documents` ∪ the kept ones; return row counts.

    Must be called inside a transaction (the IO manager opens it), so the delete and the
    inserts become visible together.
    """
    keep = sorted(set(kept_doc_keys) | {d.doc_key for d in documents})
    deleted = conn.execute(
        "DELETE FROM rag.documents WHERE source_type = %s AND partition_key = %s"
        " AND NOT (doc_key = ANY(%s))",
        (source_type, partition_key, keep),
    ).rowcount
    # Superseded versions of the changed documents go; their sections and chunks cascade.
    conn.execute(
        "DELETE FROM rag.documents WHERE source_type = %s AND partition_key = %s"
        " AND doc_key = ANY(%s)",
        (source_type, partition_key, [d.doc_key for d in documents]),
    )
    _copy_documents(conn, documents)
    return {"documents_deleted": deleted, "documents_written": len(documents)}


def _copy_documents(conn: psycopg.Connection, documents: Sequence[IndexedDocument]) -> None:
    if not documents:
        return
    ts_oids = _ts_config_oids(conn, {d.ts_config for d in documents})
    with conn.cursor() as cur:
        with cur.copy(
            "COPY rag.documents (id, source_type, partition_key, doc_key, source_id, language,"
            " title, breadcrumb, url, original_format, source_version, content_hash, input_hash,"
            " sanitizer_version, chunker_fingerprint, model_id, metadata, body)"
            " FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text"] * 16 + ["jsonb", "text"])
            for d in documents:
                copy.write_row(
                    [
                        d.id,
                        d.source_type,
                        d.partition_key,
                        d.doc_key,
                        d.source_id,
                        d.language,
                        d.title,
                        d.breadcrumb,
                        d.url,
                        d.original_format,
                        d.source_version,
                        d.content_hash,
                        d.input_hash,
                        d.sanitizer_version,
                        d.chunker_fingerprint,
                        d.model_id,
                        Jsonb(jsonb_safe(d.metadata)),
                        d.body,
                    ]
                )
        with cur.copy(
            "COPY rag.sections (id, document_id, ordinal, title, heading_path, text,"
            " start_char, end_char) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "int4", "text", "text[]", "text", "int4", "int4"])
            for d in documents:
                for s in d.sections:
                    copy.write_row(
                        [
                            s.id,
                            d.id,
                            s.ordinal,
                            s.title,
                            s.heading_path,
                            s.text,
                            s.start_char,
                            s.end_char,
                        ]
                    )
        with cur.copy(
            "COPY rag.chunks (id, document_id, section_id, source_type, language, ordinal,"
            " heading, text, embedded_text, token_count, start_char, end_char, text_sha256,"
            " ts_config, embedding) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            # regconfig's binary form is its OID.
            copy.set_types(
                [
                    "text",
                    "text",
                    "text",
                    "text",
                    "text",
                    "int4",
                    "text",
                    "text",
                    "text",
                    "int4",
                    "int4",
                    "int4",
                    "text",
                    "oid",
                    "vector",
                ]
            )
            for d in documents:
                for c in d.chunks:
                    copy.write_row(
                        [
                            c.id,
                            d.id,
                            c.section_id,
                            d.source_type,
                            d.language,
                            c.ordinal,
                            c.heading,
                            c.text,
                            c.embedded_text,
                            c.token_count,
                            c.start_char,
                            c.end_char,
                            c.text_sha256,
                            ts_oids[d.ts_config],
                            c.embedding,
                        ]
                    )


def _ts_config_oids(conn: psycopg.Connection, names: set[str]) -> dict[str, int]:
    rows = conn.execute(
        "SELECT cfgname, oid::int8 FROM pg_ts_config WHERE cfgname = ANY(%s)", (sorted(names),)
    ).fetchall()
    found = {r[0]: int(r[1]) for r in rows}
    missing = names - set(found)
    if missing:
        raise ValueError(f"PostgreSQL has no text-search configuration {sorted(missing)}")
    return found


def partition_counts(
    conn: psycopg.Connection, source_type: str, partition_key: str
) -> dict[str, int]:
    """Documents, sections and chunks the index holds for a partition."""
    row = conn.execute(
        "SELECT count(*),"
        " (SELECT count(*) FROM rag.sections s JOIN rag.documents d ON d.id = s.document_id"
        "  WHERE d.source_type = %(s)s AND d.partition_key = %(p)s),"
        " (SELECT count(*) FROM rag.chunks c JOIN rag.documents d ON d.id = c.document_id"
        "  WHERE d.source_type = %(s)s AND d.partition_key = %(p)s)"
        " FROM rag.documents WHERE source_type = %(s)s AND partition_key = %(p)s",
        {"s": source_type, "p": partition_key},
    ).fetchone()
    assert row is not None
    return {"documents": int(row[0]), "sections": int(row[1]), "chunks": int(row[2])}
