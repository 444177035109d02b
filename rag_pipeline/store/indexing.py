"""The embeddings stage: chunk records → index rows, embedding only text never seen before.

One pass over the changed documents: they are read from the chunks stage once, in batches;
the chunk texts the cache lacks are embedded a window at a time (sorted by length inside the
window, so batches pad little) on a background thread while the next window is read and the
previous one is written, and each vector goes to the cache as it is made (a killed run loses
little work). The index rows are built from the records and vectors in hand: nothing is read
back. The index writer (`store/index_writer.py`) writes the rows as they come.

With a second (multilingual) model, each chunk gets that model's vector too, from its own
cache entries: a text one model has cached and the other not is embedded by the other only.
No Dagster here.
"""

import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice

import numpy as np
import psycopg
from numpy.typing import NDArray

from rag_pipeline.core.embedding import Embedder, text_sha256
from rag_pipeline.core.ids import stable_id
from rag_pipeline.core.languages import ts_config_for
from rag_pipeline.core.models import FailedDocument
from rag_pipeline.core.records import ChunkedRecord
from rag_pipeline.store import stages
from rag_pipeline.store.cache import cached_vectors, store_vectors
from rag_pipeline.store.index import ChunkRow, IndexedDocument, SectionRow

# New chunk texts embedded together (sorted by length among themselves) and stored in the
# cache together. Larger windows pad less; smaller ones overlap reading and writing with the
# model sooner. 512 texts hold ~1 MB of text and ~0.8 MB of vectors.
EMBED_WINDOW = 512
# Documents read from the chunks stage (and looked up in the cache) per round trip.
READ_BATCH = 128
HEADING_SEPARATOR = " › "
EMBEDDINGS_VERSION = "2"

Vectors = dict[str, NDArray[np.float32]]
Work = tuple[str, str, ChunkedRecord]  # key, input hash, record


@dataclass
class EmbedResult:
    """What the embedding pass did."""

    ready: dict[str, str] = field(default_factory=lambda: {})  # key -> input hash
    failed: list[FailedDocument] = field(default_factory=lambda: [])
    chunks_embedded: int = 0
    chunks_reused: int = 0
    second_embedded: int = 0  # texts the second model embedded now
    embed_seconds: float = 0.0
    computed: set[str] = field(default_factory=lambda: set())  # sha256 of texts embedded now


def embeddings_fingerprint(
    model_id: str, max_tokens: int, second_model_id: str | None = None
) -> str:
    """Settings identity of the embeddings stage: a new model (either one) re-embeds."""
    second = f":{second_model_id}" if second_model_id else ""
    return f"embeddings:{EMBEDDINGS_VERSION}:{model_id}:{max_tokens}{second}"


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


def stage_records(
    conn: psycopg.Connection, chunks_asset: str, todo: dict[str, str]
) -> Iterator[Work]:
    """`(key, input hash, record)` of the documents in `todo`, read from the chunks stage."""
    for key, record in stages.load_records(conn, chunks_asset, ChunkedRecord, sorted(todo)):
        yield key, todo[key], record


@dataclass
class _Missing:
    """One model's share of a window: the texts its cache lacks and the vectors it holds."""

    texts: dict[str, str] = field(default_factory=lambda: {})  # sha -> text to embed
    lengths: list[int] = field(default_factory=lambda: [])  # the first model's tokens of each
    vectors: Vectors = field(default_factory=lambda: {})  # found in the cache


@dataclass
class _Window:
    """Documents whose new chunk texts are embedded together, by each model."""

    models: list[Embedder]
    documents: list[Work] = field(default_factory=lambda: [])
    missing: list[_Missing] = field(init=False)

    def __post_init__(self) -> None:
        self.missing = [_Missing() for _ in self.models]

    def full(self) -> bool:
        return any(len(m.texts) >= EMBED_WINDOW for m in self.missing)


def embedded_documents(
    conn: psycopg.Connection,
    records: Iterable[Work],
    embedder: Embedder,
    result: EmbedResult,
    *,
    second: Embedder | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[IndexedDocument]:
    """Index rows of `(key, input hash, record)`, embedding the texts the cache lacks.

    `second` (the multilingual model) gives each chunk a second vector. `conn` must be in
    autocommit mode: each window's vectors are committed to the cache as they are made.
    `result` is complete once the iterator is exhausted.
    """
    models = [embedder] if second is None else [embedder, second]
    with ThreadPoolExecutor(1, thread_name_prefix="embed") as pool:
        running: tuple[_Window, Future[tuple[list[NDArray[np.float32]], float]]] | None = None
        for window in _windows(conn, records, models, result):
            # The models work on this window while the previous one is stored and written.
            future = pool.submit(_embed, window)
            if running is not None:
                yield from _finish(conn, *running, result, progress)
            running = (window, future)
        if running is not None:
            yield from _finish(conn, *running, result, progress)


def _embed(window: _Window) -> tuple[list[NDArray[np.float32]], float]:
    started = time.perf_counter()
    vectors = [
        model.embed_passages(list(m.texts.values()), lengths=m.lengths)
        for model, m in zip(window.models, window.missing, strict=True)
    ]
    return vectors, time.perf_counter() - started


def _windows(
    conn: psycopg.Connection, records: Iterable[Work], models: list[Embedder], result: EmbedResult
) -> Iterator[_Window]:
    seen: set[str] = set()
    window = _Window(models)
    iterator = iter(records)
    while batch := list(islice(iterator, READ_BATCH)):
        wanted: dict[str, tuple[str, int]] = {}  # sha -> (text, tokens) of the batch
        for key, input_hash, record in batch:
            problem = budget_problem(record, models[0].max_tokens)
            if problem:
                result.failed.append(FailedDocument(key, "embeddings", problem))
                continue
            result.ready[key] = input_hash
            window.documents.append((key, input_hash, record))
            for chunk in record.chunks:
                sha = text_sha256(chunk.embedded_text)
                wanted.setdefault(sha, (chunk.embedded_text, chunk.token_count))
        new = [sha for sha in wanted if sha not in seen]
        seen.update(new)
        for n, (model, missing) in enumerate(zip(models, window.missing, strict=True)):
            cached = cached_vectors(conn, model.model_id, new)
            if n == 0:
                result.chunks_reused += len(cached)
            missing.vectors.update(cached)
            for sha in new:
                if sha not in cached:
                    text, tokens = wanted[sha]
                    missing.texts[sha] = text
                    missing.lengths.append(tokens)
        if window.full():
            yield window
            window = _Window(models)
    if window.documents:
        yield window


def _finish(
    conn: psycopg.Connection,
    window: _Window,
    future: Future[tuple[list[NDArray[np.float32]], float]],
    result: EmbedResult,
    progress: Callable[[int], None] | None,
) -> Iterator[IndexedDocument]:
    made, seconds = future.result()
    result.embed_seconds += seconds
    shas = {
        text_sha256(c.embedded_text) for _, _, record in window.documents for c in record.chunks
    }
    per_model: list[Vectors] = []
    for n, (model, missing, vectors) in enumerate(
        zip(window.models, window.missing, made, strict=True)
    ):
        embedded = list(zip(missing.texts, vectors, strict=True))
        store_vectors(conn, model.model_id, embedded)
        found = {**missing.vectors, **dict(embedded)}
        # Texts an earlier window embedded (or found) are in the cache by now.
        found.update(cached_vectors(conn, model.model_id, sorted(shas - found.keys())))
        per_model.append(found)
        if n == 1:
            result.second_embedded += len(embedded)
        elif embedded:
            result.chunks_embedded += len(embedded)
            result.computed.update(missing.texts)  # lineage: vectors this run computed
            if progress is not None:
                progress(result.chunks_embedded)
    second = per_model[1] if len(per_model) > 1 else None
    for key, input_hash, record in window.documents:
        yield indexed_document(
            key, record, input_hash, window.models[0].model_id, per_model[0], second
        )


def indexed_document(
    key: str,
    record: ChunkedRecord,
    input_hash: str,
    model_id: str,
    vectors: Vectors,
    second: Vectors | None = None,
) -> IndexedDocument:
    """The index rows of one document, its chunks' vectors taken from `vectors` (and the
    second model's from `second`)."""
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
                embedding_ml=None if second is None else second[sha],
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
