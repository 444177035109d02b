"""The bodies of the chain's steps: each stage's rows are written here, by the stage itself.

A document stage plans against its stored inputs, computes what changed batch by batch and
commits each batch as it goes (a killed run keeps what it finished), all on one connection:
its upstream's rows are read on it too, so a stage costs a few round trips per batch, not
per document. It then completes its partition in one transaction (the raw stage's listing
becomes the partition's membership, rows of documents no partition lists any more are
deleted, failures are recorded). The stage IO manager only hands views downstream.

The embeddings step writes the index the same way, through its one writer
(`store/index_writer.py`): the chunk records are read once, the vectors come from the model or
the cache as they are made (`store/indexing.py`), and each document's rows are written as they
are built, in one transaction. Its IO manager gets the complete result.
"""

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
import psycopg

from rag_pipeline.core.deadline_pool import close_shared_pools
from rag_pipeline.core.embedding import Embedder
from rag_pipeline.core.incremental import Plan, StageSummary, plan, run_stage
from rag_pipeline.core.models import FailedDocument
from rag_pipeline.core.stages import stored_name
from rag_pipeline.io_managers.pgvector import IndexOutput
from rag_pipeline.io_managers.stage import PARTITION_ROW_COUNT, StageView
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.store import index, runs, stages
from rag_pipeline.store.index_writer import partition_writer
from rag_pipeline.store.indexing import (
    EmbedResult,
    embedded_documents,
    embeddings_fingerprint,
    stage_records,
)
from rag_pipeline.store.locks import advisory_lock
from rag_pipeline.store.migrations import ensure_model, ensure_second_model


def committing(
    conn: psycopg.Connection, asset_key: str, run_id: str
) -> Callable[[list[tuple[str, str, Any]]], None]:
    """Store a batch of stage rows and commit it: a killed run keeps the work it finished."""

    def store(rows: list[tuple[str, str, Any]]) -> None:
        stages.upsert_records(conn, asset_key, rows, run_id)
        conn.commit()

    return store


@dataclass(frozen=True)
class StageResult:
    """What a stage step did, and the partition's row count once it completed."""

    summary: StageSummary
    metadata: dict[str, Any]


def complete_partition(
    conn: psycopg.Connection,
    *,
    asset_key: str,
    source_type: str,
    partition_key: str,
    run_id: str,
    failures: Sequence[FailedDocument],
    members: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Apply the listing, drop orphaned rows and record the failures, in one transaction.

    `members` (the raw stage's, every document the partition lists now) replaces the
    partition's membership. Returns the materialization metadata of the partition's rows.
    """
    orphaned = 0
    conn.commit()
    with conn.transaction():
        if members is not None:
            orphaned = stages.set_partition_members(conn, source_type, partition_key, members)
        stages.delete_orphans(conn, asset_key, source_type)
        runs.record_errors(
            conn,
            run_id=run_id,
            source_type=source_type,
            partition_key=partition_key,
            failures=failures,
        )
        rows = stages.partition_size(conn, asset_key, source_type, partition_key)
    metadata: dict[str, Any] = {PARTITION_ROW_COUNT: rows}
    if members is not None:
        metadata["documents_deleted"] = orphaned
    return metadata


def document_stage(
    context: dg.AssetExecutionContext,
    upstream: StageView,
    vectordb: VectorDBResource,
    *,
    stage: str,
    fingerprint: str,
    force: bool,
    transform: Callable[[Any], Any],
    reject: Callable[[Any], str | None] | None = None,
    preview: Callable[[Any], str] | None = None,
    workers: int = 1,
) -> StageResult:
    """Plan against this stage's stored inputs, transform what changed, complete the partition."""
    asset_key = stored_name(upstream.source_type, stage)
    partition_key = context.partition_key
    with (
        vectordb.connect() as conn,
        advisory_lock(conn, upstream.source_type, partition_key, stage),
    ):
        previous, _ = stages.partition_hashes(conn, asset_key, upstream.source_type, partition_key)
        upstream_hashes = upstream.content_hashes(conn)
        # Another partition may already have computed a document both list.
        previous.update(
            stages.input_hashes(conn, asset_key, [k for k in upstream_hashes if k not in previous])
        )
        work: Plan = plan(upstream_hashes, previous, fingerprint, force=force)
        context.log.info(f"{stage}: {len(work.todo)} to compute, {len(work.kept)} unchanged")
        summary = run_stage(
            stage=stage,
            work=work,
            previous_inputs=previous,
            load=lambda keys: upstream.load(keys, conn),
            transform=transform,
            store=committing(conn, asset_key, context.run.run_id),
            reject=reject,
            preview=preview,
            workers=workers,
        )
        metadata = complete_partition(
            conn,
            asset_key=asset_key,
            source_type=upstream.source_type,
            partition_key=partition_key,
            run_id=context.run.run_id,
            failures=summary.failed,
        )
    return StageResult(summary, metadata)


def embeddings_step(
    context: dg.AssetExecutionContext,
    chunks: StageView,
    vectordb: VectorDBResource,
    model: Embedder,
    *,
    second: Embedder | None = None,
    force: bool,
    describe_failures: Callable[[Sequence[FailedDocument]], str],
) -> tuple[IndexOutput, dict[str, Any]]:
    """Embed the partition's changed documents and write its index; return it and the
    step's metadata.

    The changed documents' chunk records are read once; the vectors come from the model or
    the cache as they are made, and each document's index rows are written as they are
    built (`store/index_writer.py`), all in one transaction.
    """
    started = time.perf_counter()
    # The conversion and chunking workers are done: their memory goes to the model.
    close_shared_pools()
    source, partition_key = chunks.source_type, context.partition_key
    with vectordb.connect(autocommit=True) as conn:
        ensure_model(conn, model.model_id, model.dimension, force=force)
        second_id = None if second is None else second.model_id
        if second is not None:
            ensure_second_model(conn, second.model_id, second.dimension)
        previous = index.stored_inputs(conn, source, partition_key)
        work = plan(
            chunks.content_hashes(conn),
            previous,
            embeddings_fingerprint(model.model_id, model.max_tokens, second_id),
            force=force,
        )
    result = EmbedResult()
    with (
        vectordb.connect(autocommit=True) as reading,
        advisory_lock(reading, source, partition_key, "embeddings"),
        vectordb.connect() as writing,
        partition_writer(writing, source, partition_key, context.run.run_id) as writer,
    ):
        writer.write(
            embedded_documents(
                reading,
                stage_records(reading, chunks.asset_key, work.todo),
                model,
                result,
                second=second,
                progress=lambda done: context.log.info(f"embedded {done} new chunk texts"),
            )
        )
        # The stream is consumed: `result` holds every document it made ready or failed.
        stats = _stats(result, work, previous, model.model_id, second_id)
        written = writer.finish(
            ready=result.ready,
            failed=result.failed,
            computed=result.computed,
            stats=stats,
            keep_versions=vectordb.settings().history_versions,
        )
    seconds = time.perf_counter() - started
    metadata: dict[str, Any] = {
        **stats,
        "seconds": round(seconds, 3),
        "index_write_seconds": round(written.write_seconds, 3),
        "index_record_seconds": round(written.record_seconds, 3),
        **throughput(written.documents_written, written.chunks_written, seconds),
    }
    if result.failed:
        metadata["failures"] = dg.MetadataValue.md(describe_failures(result.failed))
    return IndexOutput(source, partition_key, written), metadata


def throughput(documents: int, chunks: int, seconds: float) -> dict[str, Any]:
    """The step's throughput, plotted by Dagster across materializations (beside the counts,
    `embed_seconds` in the model, `chunks_reused` from the cache and `model_id`)."""
    return {
        "documents_written": dg.MetadataValue.int(documents),
        "chunks_written": dg.MetadataValue.int(chunks),
        "documents_per_second": dg.MetadataValue.float(
            round(documents / seconds, 3) if seconds else 0.0
        ),
        "chunks_per_second": dg.MetadataValue.float(round(chunks / seconds, 3) if seconds else 0.0),
    }


def _stats(
    result: EmbedResult,
    work: Plan,
    previous: Mapping[str, str],
    model_id: str,
    second_model_id: str | None,
) -> dict[str, Any]:
    kept = set(work.kept) | {f.source_id for f in result.failed if f.source_id in previous}
    return {
        "documents_new": len(set(result.ready) - set(previous)),
        "documents_changed": len(set(result.ready) & set(previous)),
        "documents_unchanged": len(work.kept),
        "documents_failed": len(result.failed),
        "documents_kept": len(kept),
        "chunks_embedded": result.chunks_embedded,
        "chunks_reused": result.chunks_reused,
        "second_vectors_embedded": result.second_embedded,
        "embed_seconds": round(result.embed_seconds, 3),
        "model_id": model_id,
        "second_model_id": second_model_id or "none",
    }
