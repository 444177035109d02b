"""The searchable index: documents, sections (parents) and chunks with their vectors.

The index writer (`store/index_writer.py`) calls these inside one transaction per partition:
changed documents are re-inserted with binary COPY (in batches), unchanged ones stay untouched,
documents no partition lists any more are deleted; so a run that dies half-way changes nothing
and a re-run never duplicates. Documents are keyed by `(source_type, doc_key)`, whatever
partition lists them.
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
    embedding_ml: NDArray[np.float32] | None = None  # the multilingual model's, if one is on


@dataclass(frozen=True)
class IndexedDocument:
    """One document ready for the index: its row, its parents and its chunks."""

    id: str
    source_type: str
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
    """doc_key → input hash of the indexed documents that a partition lists."""
    rows = conn.execute(
        "SELECT d.doc_key, d.input_hash FROM rag.documents d JOIN rag.document_partitions m"
        " ON m.source_type = d.source_type AND m.doc_key = d.doc_key"
        " WHERE d.source_type = %s AND m.partition_key = %s",
        (source_type, partition_key),
    ).fetchall()
    return {r[0]: r[1] for r in rows}


def delete_orphans(conn: psycopg.Connection, source_type: str) -> int:
    """Delete the source's documents no partition lists any more; return how many."""
    return conn.execute(
        "DELETE FROM rag.documents d WHERE d.source_type = %s AND NOT EXISTS ("
        " SELECT 1 FROM rag.document_partitions m"
        " WHERE m.source_type = d.source_type AND m.doc_key = d.doc_key)",
        (source_type,),
    ).rowcount


def write_documents(conn: psycopg.Connection, documents: Sequence[IndexedDocument]) -> None:
    """Replace the stored versions of `documents` (their sections and chunks cascade).

    Must be called inside a transaction (the index writer opens it), so the deletes and the
    inserts become visible together.
    """
    by_source: dict[str, list[str]] = {}
    for d in documents:
        by_source.setdefault(d.source_type, []).append(d.doc_key)
    for source_type, keys in by_source.items():
        conn.execute(
            "DELETE FROM rag.documents WHERE source_type = %s AND doc_key = ANY(%s)",
            (source_type, keys),
        )
    _copy_documents(conn, documents)


def _copy_documents(conn: psycopg.Connection, documents: Sequence[IndexedDocument]) -> None:
    if not documents:
        return
    ts_oids = _ts_config_oids(conn, {d.ts_config for d in documents})
    with conn.cursor() as cur:
        # In this order: a section references its document, a chunk its document and section.
        _copy_document_rows(cur, documents)
        _copy_section_rows(cur, documents)
        _copy_chunk_rows(cur, documents, ts_oids)


def _copy_document_rows(cur: psycopg.Cursor[Any], documents: Sequence[IndexedDocument]) -> None:
    with cur.copy(
        "COPY rag.documents (id, source_type, doc_key, source_id, language,"
        " title, breadcrumb, url, original_format, source_version, content_hash, input_hash,"
        " sanitizer_version, chunker_fingerprint, model_id, metadata, body)"
        " FROM STDIN WITH (FORMAT BINARY)"
    ) as copy:
        copy.set_types(["text"] * 15 + ["jsonb", "text"])
        for d in documents:
            copy.write_row(
                [
                    d.id,
                    d.source_type,
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


def _copy_section_rows(cur: psycopg.Cursor[Any], documents: Sequence[IndexedDocument]) -> None:
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


def _copy_chunk_rows(
    cur: psycopg.Cursor[Any], documents: Sequence[IndexedDocument], ts_oids: dict[str, int]
) -> None:
    with cur.copy(
        "COPY rag.chunks (id, document_id, section_id, source_type, language, ordinal,"
        " heading, text, embedded_text, token_count, start_char, end_char, text_sha256,"
        " ts_config, embedding, embedding_ml) FROM STDIN WITH (FORMAT BINARY)"
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
                        c.embedding_ml,
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
    """Documents, sections and chunks the index holds for the documents a partition lists."""
    row = conn.execute(
        "WITH docs AS (SELECT d.id FROM rag.documents d JOIN rag.document_partitions m"
        "  ON m.source_type = d.source_type AND m.doc_key = d.doc_key"
        "  WHERE d.source_type = %(s)s AND m.partition_key = %(p)s)"
        " SELECT (SELECT count(*) FROM docs),"
        " (SELECT count(*) FROM rag.sections WHERE document_id IN (SELECT id FROM docs)),"
        " (SELECT count(*) FROM rag.chunks WHERE document_id IN (SELECT id FROM docs))",
        {"s": source_type, "p": partition_key},
    ).fetchone()
    assert row is not None
    return {"documents": int(row[0]), "sections": int(row[1]), "chunks": int(row[2])}


def integrity_counts(
    conn: psycopg.Connection,
    source_type: str,
    partition_key: str | None,
    dimension: int,
    max_tokens: int,
) -> dict[str, int]:
    """Chunks of a partition's documents (all the source's with None) breaking an invariant."""
    row = conn.execute(
        "SELECT count(*),"
        " count(*) FILTER (WHERE s.document_id IS DISTINCT FROM c.document_id),"
        " count(*) FILTER (WHERE vector_dims(c.embedding) <> %(dim)s),"
        " count(*) FILTER (WHERE c.token_count > %(max)s)"
        " FROM rag.chunks c JOIN rag.documents d ON d.id = c.document_id"
        " LEFT JOIN rag.sections s ON s.id = c.section_id"
        " WHERE c.source_type = %(source)s AND (%(partition)s::text IS NULL OR EXISTS ("
        "  SELECT 1 FROM rag.document_partitions m WHERE m.source_type = d.source_type"
        "  AND m.doc_key = d.doc_key AND m.partition_key = %(partition)s))",
        {"dim": dimension, "max": max_tokens, "source": source_type, "partition": partition_key},
    ).fetchone()
    assert row is not None
    total, orphans, wrong_dim, over = (int(v) for v in row)
    return {
        "chunks": total,
        "chunks_without_parent": orphans,
        "chunks_with_wrong_dimension": wrong_dim,
        "chunks_over_max_tokens": over,
    }
