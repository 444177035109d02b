"""The embeddings stage: chunk records → index rows, embedding only text never seen before.

No Dagster here: the `<source>_embeddings` assets and the benchmark call `embed_records`.
"""

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import psycopg
from numpy.typing import NDArray

from rag_pipeline.core.embedding import Embedder, text_sha256
from rag_pipeline.core.ids import stable_id
from rag_pipeline.core.incremental import StageRecord
from rag_pipeline.core.languages import ts_config_for
from rag_pipeline.core.models import FailedDocument
from rag_pipeline.store.cache import cached_vectors, store_vectors
from rag_pipeline.store.index import ChunkRow, IndexedDocument, SectionRow

logger = logging.getLogger(__name__)

# Vectors reach the cache every this many texts, so a killed run loses little work.
EMBED_BATCH = 512
HEADING_SEPARATOR = " › "


@dataclass
class EmbedResult:
    """Index rows for the documents that changed, and what it cost."""

    documents: list[IndexedDocument] = field(default_factory=list)
    failed: list[FailedDocument] = field(default_factory=list)
    chunks_embedded: int = 0
    chunks_reused: int = 0
    embed_seconds: float = 0.0


def embeddings_fingerprint(model_id: str, max_tokens: int) -> str:
    """Settings identity of the embeddings stage: a new model re-embeds."""
    return f"embeddings:{model_id}:{max_tokens}"


def document_id(source_type: str, partition_key: str, doc_key: str) -> str:
    """The stable id of a document in the index (doc_key names source id and language)."""
    return stable_id(source_type, partition_key, doc_key)


def embed_records(
    conn: psycopg.Connection,
    records: Iterable[tuple[str, StageRecord]],
    embedder: Embedder,
    *,
    partition_key: str,
    progress: Callable[[int, int], None] | None = None,
) -> EmbedResult:
    """Build index rows for `(input_hash, chunk record)` pairs, using and filling the cache."""
    result = EmbedResult()
    ready: list[tuple[str, StageRecord]] = []
    for input_hash, record in records:
        problem = _budget_problem(record, embedder.max_tokens)
        if problem:
            result.failed.append(FailedDocument(record.doc_key, "embeddings", problem))
        else:
            ready.append((input_hash, record))

    texts: dict[str, str] = {}
    for _, record in ready:
        for chunk in record.meta["chunks"]:
            texts.setdefault(text_sha256(chunk["embedded_text"]), chunk["embedded_text"])
    vectors = cached_vectors(conn, embedder.model_id, list(texts))
    missing = [sha for sha in texts if sha not in vectors]
    result.chunks_reused = len(texts) - len(missing)
    started = time.perf_counter()
    for start in range(0, len(missing), EMBED_BATCH):
        batch = missing[start : start + EMBED_BATCH]
        embedded = embedder.embed_passages([texts[sha] for sha in batch])
        fresh = list(zip(batch, embedded, strict=True))
        store_vectors(conn, embedder.model_id, fresh)
        vectors.update(fresh)
        if progress is not None:
            progress(start + len(batch), len(missing))
    result.embed_seconds = time.perf_counter() - started
    result.chunks_embedded = len(missing)

    for input_hash, record in ready:
        result.documents.append(
            _indexed_document(record, input_hash, partition_key, embedder.model_id, vectors)
        )
    return result


def _budget_problem(record: StageRecord, max_tokens: int) -> str | None:
    sections = {s["ordinal"] for s in record.meta["sections"]}
    for chunk in record.meta["chunks"]:
        if chunk["token_count"] > max_tokens:
            return (
                f"chunk {chunk['ordinal']} has {chunk['token_count']} tokens, over the model's "
                f"maximum of {max_tokens}: the model would silently truncate it"
            )
        if chunk["section_ordinal"] not in sections:
            return f"chunk {chunk['ordinal']} has no parent section"
    return None


def _indexed_document(
    record: StageRecord,
    input_hash: str,
    partition_key: str,
    model_id: str,
    vectors: dict[str, NDArray[np.float32]],
) -> IndexedDocument:
    meta = record.meta
    doc_id = document_id(meta["source_type"], partition_key, record.doc_key)
    sections: dict[int, SectionRow] = {}
    for s in meta["sections"]:
        sections[s["ordinal"]] = SectionRow(
            id=stable_id(doc_id, "section", s["ordinal"], text_sha256(s["text"])),
            ordinal=s["ordinal"],
            title=s["title"],
            heading_path=list(s["heading_path"]),
            text=s["text"],
            start_char=s["start_char"],
            end_char=s["end_char"],
        )
    chunks = []
    for c in meta["chunks"]:
        section = sections[c["section_ordinal"]]
        sha = text_sha256(c["embedded_text"])
        heading_parts = [meta["title"], meta.get("breadcrumb", ""), *section.heading_path]
        chunks.append(
            ChunkRow(
                id=stable_id(doc_id, "chunk", c["ordinal"], sha),
                section_id=section.id,
                ordinal=c["ordinal"],
                heading=HEADING_SEPARATOR.join(dict.fromkeys(p for p in heading_parts if p)),
                text=c["text"],
                embedded_text=c["embedded_text"],
                token_count=c["token_count"],
                start_char=c["start_char"],
                end_char=c["end_char"],
                text_sha256=sha,
                embedding=vectors[sha],
            )
        )
    return IndexedDocument(
        id=doc_id,
        source_type=meta["source_type"],
        partition_key=partition_key,
        doc_key=record.doc_key,
        source_id=meta["source_id"],
        language=meta["language"],
        title=meta["title"],
        breadcrumb=meta.get("breadcrumb", ""),
        url=meta.get("url", ""),
        original_format=meta["original_format"],
        source_version=meta["source_version"],
        content_hash=text_sha256(record.body),
        input_hash=input_hash,
        sanitizer_version=meta["sanitizer_version"],
        chunker_fingerprint=meta["chunker_fingerprint"],
        model_id=model_id,
        ts_config=ts_config_for(meta["language"]),
        metadata=meta.get("metadata", {}),
        body=record.body,
        sections=list(sections.values()),
        chunks=chunks,
    )
