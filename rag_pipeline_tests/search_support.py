"""Rows for search tests and benchmarks, written by the index's own writer.

Documents go through the real chunker and the real model, then into the index through
`store.index.write_documents`, the writer the pgvector IO manager uses, without the stages
before it (so a search test does not run the ingestion pipeline). Columns search never reads
(hashes, versions) get placeholder values.
"""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from pgvector.psycopg import register_vector

from rag_pipeline.core.chunking import TokenCounter, chunk_markdown
from rag_pipeline.core.embedding import Embedder
from rag_pipeline.core.languages import ts_config_for
from rag_pipeline.store import index

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


def write_rows(
    conn: psycopg.Connection,
    documents: Sequence[tuple[str, Doc]],
    sections: Sequence[tuple[str, str, int, str, list[str], str, int, int]],
    chunks: Sequence[ChunkRow],
    vectors: NDArray[np.float32],
    second_vectors: NDArray[np.float32] | None = None,
) -> None:
    """Write the rows through the index's own writer (one transaction; commits);
    `second_vectors`: the multilingual model's, when the index has that leg."""
    register_vector(conn)
    parents: dict[str, list[index.SectionRow]] = {}
    for section_id, doc_id, ordinal, title, heading_path, text, start, end in sections:
        parents.setdefault(doc_id, []).append(
            index.SectionRow(section_id, ordinal, title, heading_path, text, start, end)
        )
    pieces: dict[str, list[index.ChunkRow]] = {}
    for n, (c, vector) in enumerate(zip(chunks, vectors, strict=True)):
        pieces.setdefault(c.document_id, []).append(
            index.ChunkRow(
                id=c.id,
                section_id=c.section_id,
                ordinal=c.ordinal,
                heading=c.heading,
                text=c.text,
                embedded_text=c.embedded_text,
                token_count=c.token_count,
                start_char=c.start_char,
                end_char=c.end_char,
                text_sha256=hashlib.sha256(c.embedded_text.encode()).hexdigest(),
                embedding=vector,
                embedding_ml=None if second_vectors is None else second_vectors[n],
            )
        )
    index.write_documents(
        conn,
        [
            _indexed(doc_id, doc, parents.get(doc_id, []), pieces.get(doc_id, []))
            for doc_id, doc in documents
        ],
    )
    conn.commit()


def _indexed(
    doc_id: str, doc: Doc, sections: list[index.SectionRow], chunks: list[index.ChunkRow]
) -> index.IndexedDocument:
    """A document as the pipeline hands it to the index; what search never reads is a
    placeholder."""
    placeholder = "search-support"
    return index.IndexedDocument(
        id=doc_id,
        source_type=doc.source_type,
        doc_key=f"{doc.source_id}@{doc.language}",
        source_id=doc.source_id,
        language=doc.language,
        title=doc.title,
        breadcrumb=doc.breadcrumb,
        url=doc.url,
        original_format=placeholder,
        source_version=placeholder,
        content_hash=placeholder,
        input_hash=placeholder,
        sanitizer_version=placeholder,
        chunker_fingerprint=placeholder,
        model_id=placeholder,
        ts_config=ts_config_for(doc.language),
        metadata=doc.metadata,
        body=doc.markdown,
        sections=sections,
        chunks=chunks,
    )


def index_documents(conninfo: str, docs: Sequence[Doc], embedder: Embedder) -> int:
    """Chunk, embed and store `docs` in a migrated database; return the chunk count."""
    with psycopg.connect(conninfo) as conn:
        ensure_vector_column(conn, embedder.model_id, embedder.dimension)
        documents, sections, chunks = split(docs, embedder.count_tokens)
        vectors = embedder.embed_passages([c.embedded_text for c in chunks])
        write_rows(conn, documents, sections, chunks, vectors)
    return len(chunks)
