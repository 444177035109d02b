"""The asset chain every source shares: <source>_raw → _markdown → _sanitized → _chunks →
_embeddings.

A source module defines its own `<source>_raw` asset and calls `build_chain` for the rest.
Assets stay thin: they plan the incremental work, call `core/` and report what happened.
"""

import time
from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg

from rag_pipeline.core import document_stages
from rag_pipeline.core.chunking import ChunkingSettings
from rag_pipeline.core.content_checks import editorjs_syntax_leaks, forbidden_characters
from rag_pipeline.core.incremental import StageOutput, StageRecord, plan, run_stage
from rag_pipeline.core.models import FailedDocument, SourceFormat
from rag_pipeline.indexing import embed_records, embeddings_fingerprint
from rag_pipeline.io_managers.pgvector import IndexOutput
from rag_pipeline.io_managers.stage import StageView
from rag_pipeline.resources.embedder import EmbedderResource
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.store import index, stages
from rag_pipeline.store.migrations import ensure_model

FORCE_TAG = "rag/force"
KINDS = {"python", "postgres"}
# Check names (constants, so tests and the UI agree on them).
NO_EDITORJS_SYNTAX = "no_editorjs_syntax"
NO_FORBIDDEN_CHARACTERS = "no_forbidden_characters"
CHUNKS_WITHIN_BUDGET = "chunks_within_token_budget"
INDEX_INTEGRITY = "index_integrity"
_PREVIEW_CHARS = 1500


def is_forced(context: dg.AssetExecutionContext) -> bool:
    """True when the run was launched to recompute everything (`rag ingest --force`)."""
    return context.run.tags.get(FORCE_TAG) == "true"


def chunking_settings(embedder: EmbedderResource) -> ChunkingSettings:
    """Chunk settings bounded by the loaded model's maximum sequence length."""
    settings = embedder.settings
    max_tokens = embedder.embedder.max_tokens
    return ChunkingSettings(
        target_tokens=min(settings.chunk_target_tokens, max_tokens),
        max_tokens=max_tokens,
        overlap_sentences=settings.chunk_overlap_sentences,
    )


def stage_metadata(output: StageOutput, started: float) -> dict[str, Any]:
    """What a person reads in the UI for a stage materialization."""
    metadata: dict[str, Any] = {
        **{f"documents_{name}": value for name, value in output.counts().items()},
        "seconds": round(time.perf_counter() - started, 3),
    }
    if output.failed:
        metadata["failures"] = dg.MetadataValue.md(failures_table(output.failed))
    return metadata


def failures_table(failed: Sequence[FailedDocument], limit: int = 20) -> str:
    """A Markdown table of failed documents and their reasons."""
    lines = ["| document | stage | reason |", "| --- | --- | --- |"]
    for failure in failed[:limit]:
        reason = failure.reason.replace("|", "\\|").replace("\n", " ")[:300]
        lines.append(f"| `{failure.source_id}` | {failure.stage} | {reason} |")
    if len(failed) > limit:
        lines.append(f"| … | | {len(failed) - limit} more |")
    return "\n".join(lines)


def preview(output: StageOutput) -> dict[str, Any]:
    """A Markdown preview of the first changed document."""
    if not output.changed:
        return {}
    key = sorted(output.changed)[0]
    body = output.changed[key][1].body
    shown = body[:_PREVIEW_CHARS] + ("\n\n…" if len(body) > _PREVIEW_CHARS else "")
    return {"preview": dg.MetadataValue.md(f"**{key}**\n\n{shown}"), "preview_document": key}


def run_document_stage(
    context: dg.AssetExecutionContext,
    upstream: StageView,
    vectordb: VectorDBResource,
    *,
    source: str,
    stage: str,
    fingerprint: str,
    transform: Callable[[StageRecord], StageRecord],
    workers: int = 1,
) -> StageOutput:
    """Plan against this stage's stored inputs, then transform what changed."""
    asset_key = context.asset_key.to_user_string()
    with vectordb.connect() as conn:
        previous_inputs, _ = stages.stored_hashes(conn, asset_key, context.partition_key)
    work = plan(upstream.content_hashes(), previous_inputs, fingerprint, force=is_forced(context))
    context.log.info(f"{stage}: {len(work.todo)} to compute, {len(work.kept)} unchanged")
    return run_stage(
        source_type=source,
        partition_key=context.partition_key,
        stage=stage,
        work=work,
        previous_inputs=previous_inputs,
        load=upstream.load,
        transform=transform,
        workers=workers,
    )


def reject(output: StageOutput, doc_key: str, stage: str, reason: str) -> None:
    """Take a computed document out of the output: it failed a blocking check."""
    del output.changed[doc_key]
    output.failed.append(FailedDocument(doc_key, stage, reason))
    if doc_key in output.previous_keys:
        output.kept.add(doc_key)


def enforce_check(
    output: StageOutput,
    *,
    stage: str,
    check_name: str,
    problem: Callable[[StageRecord], str | None],
    metadata: dict[str, Any] | None = None,
) -> dg.AssetCheckResult:
    """Run a blocking rule over the computed documents before they are stored.

    A document breaking it is taken out of the output (its previous version stays) and
    recorded as failed with the rule's reason; the check passes when none broke it.
    """
    rejected = 0
    for doc_key, (_, record) in list(output.changed.items()):
        reason = problem(record)
        if reason:
            rejected += 1
            reject(output, doc_key, stage, reason)
    return dg.AssetCheckResult(
        check_name=check_name,
        passed=rejected == 0,
        metadata={"documents_rejected": rejected, **(metadata or {})},
    )


def _editorjs_leak(record: StageRecord) -> str | None:
    if record.meta["original_format"] != SourceFormat.EDITORJS.value:
        return None
    words = editorjs_syntax_leaks(record.body)
    return f"Editor.js JSON left in the text: {words}" if words else None


# The stage assets carry check_specs, so Dagster sees several outputs: it rejects a
# `MaterializeResult[StageOutput]` annotation and reads a bare `MaterializeResult` as "no
# value". Unannotated, they return a MaterializeResult whose value is a StageOutput.


def build_chain(
    source: str, partitions_def: dg.PartitionsDefinition
) -> list[dg.AssetsDefinition | dg.AssetChecksDefinition]:
    """The markdown, sanitized, chunks and embeddings assets (and checks) of a source."""

    def key(stage: str) -> str:
        return f"{source}_{stage}"

    @dg.asset(
        name=key("markdown"),
        description=f"{source} documents as canonical Markdown, whatever their original format.",
        partitions_def=partitions_def,
        ins={"upstream": dg.AssetIn(key=key("raw"))},
        io_manager_key="stage_io_manager",
        kinds=KINDS,
        group_name=source,
        check_specs=[dg.AssetCheckSpec(NO_EDITORJS_SYNTAX, asset=key("markdown"), blocking=True)],
    )
    def markdown_asset(
        context: dg.AssetExecutionContext, upstream: StageView, vectordb: VectorDBResource
    ):  # no annotation: see the note above build_chain
        started = time.perf_counter()
        output = run_document_stage(
            context,
            upstream,
            vectordb,
            source=source,
            stage="markdown",
            fingerprint=document_stages.markdown_fingerprint(),
            transform=document_stages.to_markdown_record,
            # Conversion is pure per-document CPU work: spread it over the cores.
            workers=vectordb.settings().effective_workers,
        )
        check = enforce_check(
            output, stage="markdown", check_name=NO_EDITORJS_SYNTAX, problem=_editorjs_leak
        )
        return dg.MaterializeResult(
            value=output,
            metadata={**stage_metadata(output, started), **preview(output)},
            check_results=[check],
        )

    @dg.asset(
        name=key("sanitized"),
        description=f"{source} Markdown cleaned for storage and embedding (sanitizer rules).",
        partitions_def=partitions_def,
        ins={"upstream": dg.AssetIn(key=key("markdown"))},
        io_manager_key="stage_io_manager",
        kinds=KINDS,
        group_name=source,
        check_specs=[
            dg.AssetCheckSpec(NO_FORBIDDEN_CHARACTERS, asset=key("sanitized"), blocking=True)
        ],
    )
    def sanitized_asset(
        context: dg.AssetExecutionContext, upstream: StageView, vectordb: VectorDBResource
    ):  # no annotation: see the note above build_chain
        started = time.perf_counter()
        output = run_document_stage(
            context,
            upstream,
            vectordb,
            source=source,
            stage="sanitized",
            fingerprint=document_stages.sanitize_fingerprint(),
            transform=document_stages.sanitize_record,
        )
        totals: dict[str, int] = {}
        for _, record in output.changed.values():
            for rule, count in record.meta.get("sanitize_counts", {}).items():
                totals[rule] = totals.get(rule, 0) + count
        check = enforce_check(
            output,
            stage="sanitized",
            check_name=NO_FORBIDDEN_CHARACTERS,
            problem=lambda record: forbidden_characters(record.body + record.meta["title"]),
        )
        return dg.MaterializeResult(
            value=output,
            metadata={
                **stage_metadata(output, started),
                **{f"sanitize_{rule}": count for rule, count in sorted(totals.items())},
            },
            check_results=[check],
        )

    @dg.asset(
        name=key("chunks"),
        description=f"{source} sections (parents) and token-bounded chunks to embed.",
        partitions_def=partitions_def,
        ins={"upstream": dg.AssetIn(key=key("sanitized"))},
        io_manager_key="stage_io_manager",
        kinds=KINDS,
        group_name=source,
        check_specs=[dg.AssetCheckSpec(CHUNKS_WITHIN_BUDGET, asset=key("chunks"), blocking=True)],
    )
    def chunks_asset(
        context: dg.AssetExecutionContext,
        upstream: StageView,
        vectordb: VectorDBResource,
        embedder: EmbedderResource,
    ):  # no annotation: see the note above build_chain
        started = time.perf_counter()
        settings = chunking_settings(embedder)
        output = run_document_stage(
            context,
            upstream,
            vectordb,
            source=source,
            stage="chunks",
            # Token counts depend on the tokenizer: a new model re-chunks.
            fingerprint=f"{settings.fingerprint()}:{embedder.embedder.model_id}",
            transform=document_stages.chunker(embedder.embedder.count_tokens, settings),
        )
        chunk_count = sum(len(record.meta["chunks"]) for _, record in output.changed.values())

        def over_budget(record: StageRecord) -> str | None:
            worst = max((c["token_count"] for c in record.meta["chunks"]), default=0)
            if worst > settings.max_tokens:
                return f"a chunk has {worst} tokens, over the maximum of {settings.max_tokens}"
            return None

        check = enforce_check(
            output,
            stage="chunks",
            check_name=CHUNKS_WITHIN_BUDGET,
            problem=over_budget,
            metadata={"max_tokens": settings.max_tokens},
        )
        return dg.MaterializeResult(
            value=output,
            metadata={**stage_metadata(output, started), "chunks_computed": chunk_count},
            check_results=[check],
        )

    @dg.asset(
        name=key("embeddings"),
        description=f"{source} chunks with their vectors: the searchable index (pgvector).",
        partitions_def=partitions_def,
        ins={"chunks": dg.AssetIn(key=key("chunks"))},
        io_manager_key="pgvector_io_manager",
        kinds={"python", "postgres", "pgvector"},
        group_name=source,
    )
    def embeddings_asset(
        context: dg.AssetExecutionContext,
        chunks: StageView,
        vectordb: VectorDBResource,
        embedder: EmbedderResource,
    ) -> dg.MaterializeResult[IndexOutput]:
        started = time.perf_counter()
        model = embedder.embedder
        partition_key = context.partition_key
        with vectordb.connect() as conn:
            ensure_model(conn, model.model_id, model.dimension, force=is_forced(context))
            previous = index.stored_inputs(conn, source, partition_key)
        work = plan(
            chunks.content_hashes(),
            previous,
            embeddings_fingerprint(model.model_id, model.max_tokens),
            force=is_forced(context),
        )
        records = [(work.todo[r.doc_key], r) for r in chunks.load(sorted(work.todo))]

        def progress(done: int, total: int) -> None:
            context.log.info(f"embedded {done}/{total} new chunk texts")

        with vectordb.connect(autocommit=True) as conn:
            result = embed_records(
                conn, records, model, partition_key=partition_key, progress=progress
            )
        kept = set(work.kept) | {f.source_id for f in result.failed if f.source_id in previous}
        written = {d.doc_key for d in result.documents}
        stats = {
            "documents_new": len(written - set(previous)),
            "documents_changed": len(written & set(previous)),
            "documents_unchanged": len(work.kept),
            "documents_deleted": len(set(previous) - written - kept),
            "documents_failed": len(result.failed),
            "chunks_embedded": result.chunks_embedded,
            "chunks_reused": result.chunks_reused,
            "chunks_written": sum(len(d.chunks) for d in result.documents),
            "embed_seconds": round(result.embed_seconds, 3),
            "model_id": model.model_id,
        }
        metadata: dict[str, Any] = {**stats, "seconds": round(time.perf_counter() - started, 3)}
        if result.failed:
            metadata["failures"] = dg.MetadataValue.md(failures_table(result.failed))
        return dg.MaterializeResult(
            value=IndexOutput(
                source_type=source,
                partition_key=partition_key,
                documents=result.documents,
                kept_doc_keys=kept,
                failed=result.failed,
                stats=stats,
            ),
            metadata=metadata,
        )

    @dg.asset_check(
        asset=embeddings_asset,
        name=INDEX_INTEGRITY,
        blocking=True,
        description="Every stored chunk has a parent in its own document, a vector of the "
        "model's dimension and fits the model's sequence length.",
    )
    def index_integrity(
        context: dg.AssetCheckExecutionContext,
        vectordb: VectorDBResource,
        embedder: EmbedderResource,
    ) -> dg.AssetCheckResult:
        model = embedder.embedder
        with vectordb.connect() as conn:
            row = conn.execute(
                "SELECT count(*),"
                " count(*) FILTER (WHERE s.document_id IS DISTINCT FROM c.document_id),"
                " count(*) FILTER (WHERE vector_dims(c.embedding) <> %(dim)s),"
                " count(*) FILTER (WHERE c.token_count > %(max)s)"
                " FROM rag.chunks c LEFT JOIN rag.sections s ON s.id = c.section_id"
                " WHERE c.source_type = %(source)s",
                {"dim": model.dimension, "max": model.max_tokens, "source": source},
            ).fetchone()
        assert row is not None
        total, orphans, wrong_dim, over = (int(v) for v in row)
        return dg.AssetCheckResult(
            passed=orphans == 0 and wrong_dim == 0 and over == 0,
            metadata={
                "chunks": total,
                "chunks_without_parent": orphans,
                "chunks_with_wrong_dimension": wrong_dim,
                "chunks_over_max_tokens": over,
            },
        )

    return [markdown_asset, sanitized_asset, chunks_asset, embeddings_asset, index_integrity]
