"""Rows for search tests and benchmarks, written straight into the index tables.

Documents go through the real chunker and the real model, then into rag.documents /
rag.sections / rag.chunks with binary COPY, the column list the indexer uses. Columns of
rag.documents that search never reads (hashes, versions, partition bookkeeping) get
placeholder values, whatever the current schema calls them, so these helpers do not depend on
the ingestion pipeline.
"""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.json import Jsonb

from rag_pipeline.core.chunking import TokenCounter, chunk_markdown
from rag_pipeline.core.embedding import Embedder
from rag_pipeline.core.languages import ts_config_for

HEADING_SEPARATOR = " › "


@dataclass(frozen=True)
class Doc:
    """A document to index: Markdown with its identity and metadata."""

    source_type: str
    source_id: str
    title: str
    markdown: str
    language: str = "en_US"
    breadcrumb: str = ""
    url: str = ""
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])


@dataclass(frozen=True)
class ChunkRow:
    """A chunk ready for COPY (without its vector)."""

    id: str
    document_id: str
    section_id: str
    source_type: str
    language: str
    ordinal: int
    heading: str
    text: str
    embedded_text: str
    token_count: int
    start_char: int
    end_char: int


def _id(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()


def split(
    docs: Sequence[Doc], count_tokens: TokenCounter
) -> tuple[
    list[tuple[str, Doc]], list[tuple[str, str, int, str, list[str], str, int, int]], list[ChunkRow]
]:
    """Documents, sections and chunks (with deterministic ids) of `docs`."""
    documents: list[tuple[str, Doc]] = []
    sections: list[tuple[str, str, int, str, list[str], str, int, int]] = []
    chunks: list[ChunkRow] = []
    for doc in docs:
        doc_id = _id(doc.source_type, doc.source_id, doc.language)
        documents.append((doc_id, doc))
        parts, pieces = chunk_markdown(
            doc.markdown, title=doc.title, breadcrumb=doc.breadcrumb, count_tokens=count_tokens
        )
        section_ids: dict[int, str] = {}
        for s in parts:
            section_ids[s.ordinal] = _id(doc_id, "section", s.ordinal, s.text)
            sections.append(
                (
                    section_ids[s.ordinal],
                    doc_id,
                    s.ordinal,
                    s.title,
                    list(s.heading_path),
                    s.text,
                    s.start_char,
                    s.end_char,
                )
            )
        for c in pieces:
            section = parts[c.section_ordinal]
            heading_parts = [doc.title, doc.breadcrumb, *section.heading_path]
            chunks.append(
                ChunkRow(
                    id=_id(doc_id, "chunk", c.ordinal, c.embedded_text),
                    document_id=doc_id,
                    section_id=section_ids[c.section_ordinal],
                    source_type=doc.source_type,
                    language=doc.language,
                    ordinal=c.ordinal,
                    heading=HEADING_SEPARATOR.join(dict.fromkeys(p for p in heading_parts if p)),
                    text=c.text,
                    embedded_text=c.embedded_text,
                    token_count=c.token_count,
                    start_char=c.start_char,
                    end_char=c.end_char,
                )
            )
    return documents, sections, chunks


def ensure_vector_column(conn: psycopg.Connection, model_id: str, dimension: int) -> None:
    """Type the vector column and build its HNSW index, as `rag init` does."""
    from rag_pipeline.store.migrations import ensure_model, migrate

    migrate(conn)
    ensure_model(conn, model_id, dimension, force=True)
    conn.commit()


def _document_columns(conn: psycopg.Connection) -> list[tuple[str, str]]:
    """(name, type) of rag.documents' columns that need a value (no default, not null)."""
    rows = conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = 'rag' AND table_name = 'documents'"
        "   AND is_nullable = 'NO' AND column_default IS NULL AND is_generated = 'NEVER'"
        " ORDER BY ordinal_position"
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def write_rows(
    conn: psycopg.Connection,
    documents: Sequence[tuple[str, Doc]],
    sections: Sequence[tuple[str, str, int, str, list[str], str, int, int]],
    chunks: Sequence[ChunkRow],
    vectors: NDArray[np.float32],
) -> None:
    """COPY the rows in (one transaction; commits)."""
    register_vector(conn)
    known = {
        "id",
        "source_type",
        "source_id",
        "language",
        "title",
        "breadcrumb",
        "url",
        "metadata",
    }
    extra = [(name, kind) for name, kind in _document_columns(conn) if name not in known]
    names = ["id", "source_type", "source_id", "language", "title", "breadcrumb", "url"]
    names += ["metadata"] + [name for name, _ in extra]
    ts_oids = dict(
        conn.execute("SELECT cfgname, oid::int8 FROM pg_ts_config").fetchall()  # type: ignore[arg-type]
    )
    with conn.cursor() as cur:
        statement = sql.SQL("COPY rag.documents ({}) FROM STDIN").format(
            sql.SQL(", ").join(sql.Identifier(n) for n in names)
        )
        with cur.copy(statement) as copy:
            for doc_id, d in documents:
                values: list[Any] = [
                    doc_id,
                    d.source_type,
                    d.source_id,
                    d.language,
                    d.title,
                    d.breadcrumb,
                    d.url,
                    Jsonb(d.metadata),
                ]
                for name, kind in extra:
                    if name == "doc_key":
                        values.append(f"{d.source_id}@{d.language}")
                    elif kind in ("integer", "bigint"):
                        values.append(0)
                    elif kind == "jsonb":
                        values.append(Jsonb({}))
                    else:
                        values.append(d.markdown if name == "body" else "search-support")
                copy.write_row(values)
        with cur.copy(
            "COPY rag.sections (id, document_id, ordinal, title, heading_path, text,"
            " start_char, end_char) FROM STDIN"
        ) as copy:
            for row in sections:
                copy.write_row(row)
        with cur.copy(
            "COPY rag.chunks (id, document_id, section_id, source_type, language, ordinal,"
            " heading, text, embedded_text, token_count, start_char, end_char, text_sha256,"
            " ts_config, embedding) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(
                ["text"] * 5
                + ["int4", "text", "text", "text", "int4", "int4", "int4"]
                + ["text", "oid", "vector"]
            )
            language_oid: dict[str, int] = {}
            for c, vector in zip(chunks, vectors, strict=True):
                if c.language not in language_oid:
                    language_oid[c.language] = int(ts_oids[ts_config_for(c.language)])
                copy.write_row(
                    [
                        c.id,
                        c.document_id,
                        c.section_id,
                        c.source_type,
                        c.language,
                        c.ordinal,
                        c.heading,
                        c.text,
                        c.embedded_text,
                        c.token_count,
                        c.start_char,
                        c.end_char,
                        hashlib.sha256(c.embedded_text.encode()).hexdigest(),
                        language_oid[c.language],
                        vector,
                    ]
                )
    conn.commit()


def index_documents(conninfo: str, docs: Sequence[Doc], embedder: Embedder) -> int:
    """Chunk, embed and store `docs` in a migrated database; return the chunk count."""
    with psycopg.connect(conninfo) as conn:
        ensure_vector_column(conn, embedder.model_id, embedder.dimension)
        documents, sections, chunks = split(docs, embedder.count_tokens)
        vectors = embedder.embed_passages([c.embedded_text for c in chunks])
        write_rows(conn, documents, sections, chunks, vectors)
    return len(chunks)
