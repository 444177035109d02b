"""The document stages of a source's chain: markdown → sanitized → chunks → embeddings.

Each stage asset reads its upstream stage's records (`StageView`), transforms only what
changed (`steps.document_stage`) and rejects a document that breaks its stage's rule: the
document keeps its previous version and the failure is recorded, which the stage's check
(`checks.py`) reports per partition. The embeddings asset embeds what changed and writes the
partition's index itself, through the index writer; the pgvector IO manager reports it.
"""

import time
from datetime import timedelta
from typing import Any

import dagster as dg

from rag_pipeline.core import document_stages
from rag_pipeline.core.chunking import ChunkingSettings
from rag_pipeline.core.content_checks import editorjs_structure_leaks, forbidden_characters
from rag_pipeline.core.models import SourceFormat
from rag_pipeline.core.records import ChunkedRecord, MarkdownRecord, SanitizedRecord
from rag_pipeline.core.source import ChainOptions
from rag_pipeline.core.stages import CHUNKS
from rag_pipeline.io_managers.pgvector import IndexOutput
from rag_pipeline.io_managers.stage import StageOutput, StageView, stage_definition_metadata
from rag_pipeline.orchestration.asset_common import (
    KINDS,
    OWNERS,
    IngestConfig,
    failures_table,
    stage_metadata,
    stage_tags,
)
from rag_pipeline.orchestration.automation import DOWNSTREAM_AUTOMATION
from rag_pipeline.orchestration.checks import (
    CHUNKS_WITHIN_BUDGET,
    NO_EDITORJS_SYNTAX,
    NO_FORBIDDEN_CHARACTERS,
    freshness_hours,
)
from rag_pipeline.orchestration.source_registry import EMBEDDINGS, SourceSpec
from rag_pipeline.orchestration.steps import document_stage, embeddings_step
from rag_pipeline.resources.embedder import EmbedderResource
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.settings import load_settings
from rag_pipeline.store.indexing import EMBEDDINGS_VERSION

# Concurrency pool of the model (its limit is set per deployment, e.g. by
# RAG_EMBEDDING_CONCURRENCY or `dagster instance concurrency set embedding 1`).
EMBEDDING_POOL = "embedding"


def document_assets(
    spec: SourceSpec, partitions_def: dg.PartitionsDefinition, options: ChainOptions
) -> list[dg.AssetsDefinition]:
    """The markdown, sanitized, chunks and embeddings assets of a source."""
    return [
        _markdown_asset(spec, partitions_def, options),
        _sanitized_asset(spec, partitions_def),
        _chunks_asset(spec, partitions_def),
        _embeddings_asset(spec, partitions_def),
    ]


def _stage_asset(
    spec: SourceSpec, stage: str, upstream: str, partitions_def: dg.PartitionsDefinition
) -> Any:
    """The decorator of a document stage reading one upstream stage."""
    return dg.asset(
        key=spec.asset_key(stage),
        description=_DESCRIPTIONS[stage].format(source=spec.name),
        partitions_def=partitions_def,
        ins={"upstream": dg.AssetIn(key=spec.asset_key(upstream))},
        io_manager_key="stage_io_manager",
        kinds=KINDS,
        group_name=spec.group_name,
        code_version=document_stages.code_versions()[stage],
        automation_condition=DOWNSTREAM_AUTOMATION,
        owners=OWNERS,
        tags=stage_tags(spec.name, stage),
        metadata=stage_definition_metadata(spec.name, stage),
    )


_DESCRIPTIONS = {
    "markdown": "{source} documents as canonical Markdown, whatever their original format.",
    "sanitized": "{source} Markdown cleaned for storage and embedding (sanitizer rules).",
    "chunks": "{source} sections (parents) and token-bounded chunks to embed.",
}


def _markdown_asset(
    spec: SourceSpec, partitions_def: dg.PartitionsDefinition, options: ChainOptions
) -> dg.AssetsDefinition:
    @_stage_asset(spec, "markdown", "raw", partitions_def)
    def markdown(
        context: dg.AssetExecutionContext,
        config: IngestConfig,
        upstream: StageView,
        vectordb: VectorDBResource,
        embedder: EmbedderResource,
    ) -> dg.MaterializeResult[StageOutput]:
        started = time.perf_counter()
        done = document_stage(
            context,
            upstream,
            vectordb,
            stage="markdown",
            fingerprint=document_stages.markdown_fingerprint(options),
            force=config.force,
            transform=document_stages.MarkdownStage(
                options, vectordb.settings().max_convert_seconds
            ),
            reject=_editorjs_leak,
            preview=lambda record: record.body,
            # Conversion is pure per-document CPU work: spread it over the cores.
            workers=config.workers or vectordb.settings().effective_workers,
        )
        return dg.MaterializeResult(
            value=StageOutput(spec.name, context.partition_key, done.summary),
            metadata=stage_metadata(done.summary, started, **done.metadata),
        )

    return markdown


def _sanitized_asset(
    spec: SourceSpec, partitions_def: dg.PartitionsDefinition
) -> dg.AssetsDefinition:
    @_stage_asset(spec, "sanitized", "markdown", partitions_def)
    def sanitized(
        context: dg.AssetExecutionContext,
        config: IngestConfig,
        upstream: StageView,
        vectordb: VectorDBResource,
    ) -> dg.MaterializeResult[StageOutput]:
        started = time.perf_counter()
        totals: dict[str, int] = {}

        def counted(record: SanitizedRecord) -> str | None:
            for rule, count in record.sanitize_counts.items():
                totals[rule] = totals.get(rule, 0) + count
            return _forbidden(record)

        done = document_stage(
            context,
            upstream,
            vectordb,
            stage="sanitized",
            fingerprint=document_stages.sanitize_fingerprint(),
            force=config.force,
            transform=document_stages.sanitize_record,
            reject=counted,
            workers=config.workers or vectordb.settings().effective_workers,
        )
        counts = {f"sanitize_{rule}": count for rule, count in sorted(totals.items())}
        return dg.MaterializeResult(
            value=StageOutput(spec.name, context.partition_key, done.summary),
            metadata=stage_metadata(done.summary, started, **counts, **done.metadata),
        )

    return sanitized


def _chunks_asset(spec: SourceSpec, partitions_def: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    @_stage_asset(spec, "chunks", "sanitized", partitions_def)
    def chunks(
        context: dg.AssetExecutionContext,
        config: IngestConfig,
        upstream: StageView,
        vectordb: VectorDBResource,
        embedder: EmbedderResource,
    ) -> dg.MaterializeResult[StageOutput]:
        started = time.perf_counter()
        settings = chunking_settings(embedder)
        model = embedder.embedder
        chunk_count = 0

        def over_budget(record: ChunkedRecord) -> str | None:
            nonlocal chunk_count
            chunk_count += len(record.chunks)
            worst = max((c.token_count for c in record.chunks), default=0)
            if worst > settings.max_tokens:
                return (
                    f"{CHUNKS_WITHIN_BUDGET}: a chunk has {worst} tokens, over the maximum of "
                    f"{settings.max_tokens}"
                )
            return None

        done = document_stage(
            context,
            upstream,
            vectordb,
            stage="chunks",
            fingerprint=document_stages.chunk_fingerprint(settings, model.model_id),
            force=config.force,
            transform=document_stages.ChunkStage(
                model.token_counter, settings, embedder.settings.max_convert_seconds
            ),
            reject=over_budget,
            preview=_chunks_preview,
            # Chunking is per-document CPU work too (the counter is picklable); the workers
            # are the ones conversion started.
            workers=config.workers or vectordb.settings().effective_workers,
        )
        return dg.MaterializeResult(
            value=StageOutput(spec.name, context.partition_key, done.summary),
            metadata=stage_metadata(
                done.summary, started, chunks_computed=chunk_count, **done.metadata
            ),
        )

    return chunks


def _embeddings_asset(
    spec: SourceSpec, partitions_def: dg.PartitionsDefinition
) -> dg.AssetsDefinition:
    hours = freshness_hours(load_settings(), spec.name)

    @dg.asset(
        key=spec.asset_key(EMBEDDINGS),
        description=f"{spec.name} chunks with their vectors: the searchable index (pgvector).",
        partitions_def=partitions_def,
        ins={"chunks": dg.AssetIn(key=spec.asset_key(CHUNKS))},
        io_manager_key="pgvector_io_manager",
        kinds={"python", "postgres", "pgvector"},
        group_name=spec.group_name,
        code_version=EMBEDDINGS_VERSION,
        automation_condition=DOWNSTREAM_AUTOMATION,
        pool=EMBEDDING_POOL,
        owners=OWNERS,
        tags=stage_tags(spec.name, EMBEDDINGS),
        metadata=stage_definition_metadata(spec.name, EMBEDDINGS),
        # The index is fresh when its last sync is within the window (RAG_FRESHNESS_HOURS).
        freshness_policy=dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=hours)),
    )
    def embeddings(
        context: dg.AssetExecutionContext,
        config: IngestConfig,
        chunks: StageView,
        vectordb: VectorDBResource,
        embedder: EmbedderResource,
    ) -> dg.MaterializeResult[IndexOutput]:
        output, metadata = embeddings_step(
            context,
            chunks,
            vectordb,
            embedder.embedder,
            second=embedder.second,
            force=config.force,
            describe_failures=failures_table,
        )
        return dg.MaterializeResult(value=output, metadata=metadata)

    return embeddings


def chunking_settings(embedder: EmbedderResource) -> ChunkingSettings:
    """Chunk settings bounded by the loaded model's maximum sequence length."""
    max_tokens = embedder.embedder.max_tokens
    settings = embedder.settings
    return ChunkingSettings(
        target_tokens=min(settings.chunk_target_tokens, max_tokens),
        max_tokens=max_tokens,
        overlap_sentences=settings.chunk_overlap_sentences,
        max_chunks=settings.max_chunks_per_document,
        max_chunk_chars=settings.max_chunk_chars,
    )


def _editorjs_leak(record: MarkdownRecord) -> str | None:
    if record.info.original_format is not SourceFormat.EDITORJS:
        return None
    leaks = editorjs_structure_leaks(record.body)
    return f"{NO_EDITORJS_SYNTAX}: Editor.js JSON left in the text: {leaks}" if leaks else None


def _forbidden(record: SanitizedRecord) -> str | None:
    found = forbidden_characters(record.body + record.info.title)
    return f"{NO_FORBIDDEN_CHARACTERS}: {found}" if found else None


def _chunks_preview(record: ChunkedRecord) -> str:
    parts = [f"{len(record.sections)} sections, {len(record.chunks)} chunks"]
    for chunk in record.chunks[:3]:
        parts.append(f"---\n*{chunk.token_count} tokens*\n\n{chunk.embedded_text}")
    return "\n\n".join(parts)
