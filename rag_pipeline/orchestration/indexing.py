"""The embeddings stage: chunk records → index rows, embedding only text never seen before.

Two passes over the changed documents, each streaming them in batches from the chunks stage:
`embed_missing` embeds the chunk texts the cache lacks (the asset calls it; vectors reach the
cache as they are made, so a killed run loses little work), then `indexed_documents` builds the
index rows from the cache (the pgvector IO manager calls it inside its one transaction).
No Dagster here.
"""

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import psycopg
from numpy.typing import NDArray

from rag_pipeline.core.embedding import Embedder, text_sha256
from rag_pipeline.core.ids import stable_id
from rag_pipeline.core.languages import ts_config_for
from rag_pipeline.core.models import FailedDocument
from rag_pipeline.core.records import ChunkedRecord
from rag_pipeline.store.cache import cached_vectors, store_vectors
from rag_pipeline.store.index import ChunkRow, IndexedDocument, SectionRow

# Texts embedded (and stored in the cache) together.
EMBED_BATCH = 512
HEADING_SEPARATOR = " › "
EMBEDDINGS_VERSION = "2"


@dataclass
class EmbedResult:
    """What the embedding pass did."""

    ready: dict[str, str] = field(default_factory=lambda: {})  # key -> input hash
    failed: list[FailedDocument] = field(default_factory=lambda: [])
    chunks_embedded: int = 0
    chunks_reused: int = 0
    embed_seconds: float = 0.0
    computed: set[str] = field(default_factory=lambda: set())  # sha256 of texts embedded now


def embeddings_fingerprint(model_id: str, max_tokens: int) -> str:
    """Settings identity of the embeddings stage: a new model re-embeds."""
    return f"embeddings:{EMBEDDINGS_VERSION}:{model_id}:{max_tokens}"


def document_id(source_type: str, doc_key: str) -> str:
    """The stable id of a document in the index (its key names source id and language)."""
    return stable_id(source_type, doc_key)


def budget_problem(record: ChunkedRecord, max_tokens: int) -> str | None:
    """Why a document's chunks cannot be indexed as they are, or None."""
    sections = {s.ordinal for s in record.sections}
    for chunk in record.chunks:
        if chunk.token_count > max_tokens:
            return (
                f"chunk {chunk.ordinal} has {chunk.token_count} tokens, over the model's "
                f"maximum of {max_tokens}: the model would silently truncate it"
            )
        if chunk.section_ordinal not in sections:
            return f"chunk {chunk.ordinal} has no parent section"
    return None


def embed_missing(
    conn: psycopg.Connection,
    records: Iterable[tuple[str, str, ChunkedRecord]],
    embedder: Embedder,
    *,
    progress: Callable[[int], None] | None = None,
) -> EmbedResult:
    """Embed the chunk texts of `(key, input hash, record)` that the cache lacks.

    `conn` must be in autocommit mode: each batch of vectors is committed as it is made.
    """
    result = EmbedResult()
    pending: dict[str, str] = {}  # sha -> text, not yet in the cache
    seen: set[str] = set()

    def flush() -> None:
        started = time.perf_counter()
        shas = list(pending)
        vectors = embedder.embed_passages([pending[sha] for sha in shas])
        store_vectors(conn, embedder.model_id, list(zip(shas, vectors, strict=True)))
        result.embed_seconds += time.perf_counter() - started
        result.chunks_embedded += len(shas)
        result.computed.update(shas)
        pending.clear()
        if progress is not None:
            progress(result.chunks_embedded)

    for key, input_hash, record in records:
        problem = budget_problem(record, embedder.max_tokens)
        if problem:
            result.failed.append(FailedDocument(key, "embeddings", problem))
            continue
        result.ready[key] = input_hash
        texts = {text_sha256(c.embedded_text): c.embedded_text for c in record.chunks}
        new = [sha for sha in texts if sha not in seen]
        seen.update(new)
        cached = cached_vectors(conn, embedder.model_id, new)
        result.chunks_reused += len(cached)
        pending.update({sha: texts[sha] for sha in new if sha not in cached})
        if len(pending) >= EMBED_BATCH:
            flush()
    if pending:
        flush()
    return result


def indexed_documents(
    conn: psycopg.Connection,
    records: Iterable[tuple[str, str, ChunkedRecord]],
    model_id: str,
) -> Iterator[IndexedDocument]:
    """Index rows of `(key, input hash, record)`, their vectors read from the cache."""
    for key, input_hash, record in records:
        shas = [text_sha256(c.embedded_text) for c in record.chunks]
        vectors = cached_vectors(conn, model_id, shas)
        missing = [sha for sha in shas if sha not in vectors]
        if missing:
            raise RuntimeError(
                f"{key}: {len(missing)} chunk vectors are missing from the embedding cache "
                "(was it cleared during the run?); run the job again"
            )
        yield _indexed_document(key, record, input_hash, model_id, vectors)


def _indexed_document(
    key: str,
    record: ChunkedRecord,
    input_hash: str,
    model_id: str,
    vectors: dict[str, NDArray[np.float32]],
) -> IndexedDocument:
    info = record.info
    doc_id = document_id(info.source_type, key)
    sections: dict[int, SectionRow] = {}
    for s in record.sections:
        sections[s.ordinal] = SectionRow(
            id=stable_id(doc_id, "section", s.ordinal, text_sha256(s.text)),
            ordinal=s.ordinal,
            title=s.title,
            heading_path=list(s.heading_path),
            text=s.text,
            start_char=s.start_char,
            end_char=s.end_char,
        )
    chunks: list[ChunkRow] = []
    for c in record.chunks:
        section = sections[c.section_ordinal]
        sha = text_sha256(c.embedded_text)
        heading_parts = [info.title, info.breadcrumb, *section.heading_path]
        chunks.append(
            ChunkRow(
                id=stable_id(doc_id, "chunk", c.ordinal, sha),
                section_id=section.id,
                ordinal=c.ordinal,
                heading=HEADING_SEPARATOR.join(dict.fromkeys(p for p in heading_parts if p)),
                text=c.text,
                embedded_text=c.embedded_text,
                token_count=c.token_count,
                start_char=c.start_char,
                end_char=c.end_char,
                text_sha256=sha,
                embedding=vectors[sha],
            )
        )
    return IndexedDocument(
        id=doc_id,
        source_type=info.source_type,
        doc_key=key,
        source_id=info.source_id,
        language=info.language,
        title=info.title,
        breadcrumb=info.breadcrumb,
        url=info.url,
        original_format=info.original_format.value,
        source_version=info.version,
        content_hash=text_sha256(record.body),
        input_hash=input_hash,
        sanitizer_version=record.sanitizer_version,
        chunker_fingerprint=record.chunker_fingerprint,
        model_id=model_id,
        ts_config=ts_config_for(info.language),
        metadata=info.metadata,
        body=record.body,
        sections=list(sections.values()),
        chunks=chunks,
    )
