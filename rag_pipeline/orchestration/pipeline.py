"""A source's whole Dagster side, built once for every source: `source_definitions(...)`.

Its source system (an external asset) → raw → markdown → sanitized → chunks → embeddings, the
checks on each stage (per partition), its freshness policy and its ingest job, every name taken
from the source's `SourceSpec` (`source_registry.py`). A source plug-in only lists and fetches
documents (see `core/source.py`); its Dagster wiring is a `SourceResource` subclass (its
configuration, shown and overridable in the launchpad) and one call of `source_definitions` in
`defs/<source>/`. Assets stay thin: they plan the incremental work, call `core/` and report
what happened.
"""

import time
from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any

import dagster as dg

from rag_pipeline.core import document_stages
from rag_pipeline.core.chunking import ChunkingSettings
from rag_pipeline.core.content_checks import editorjs_structure_leaks, forbidden_characters
from rag_pipeline.core.incremental import StageSummary, plan, run_stage
from rag_pipeline.core.models import FailedDocument, SourceFormat
from rag_pipeline.core.records import (
    ChunkedRecord,
    DocumentInfo,
    MarkdownRecord,
    RawRecord,
    SanitizedRecord,
)
from rag_pipeline.core.source import (
    ChainOptions,
    DocumentError,
    DocumentRef,
    Source,
    SourceDocument,
)
from rag_pipeline.io_managers.pgvector import IndexOutput
from rag_pipeline.io_managers.stage import StageOutput, StageView, stage_definition_metadata
from rag_pipeline.orchestration.automation import DOWNSTREAM_AUTOMATION
from rag_pipeline.orchestration.checks import failed_documents_check, freshness_hours, partition_of
from rag_pipeline.orchestration.executors import run_tags
from rag_pipeline.orchestration.indexing import EMBEDDINGS_VERSION
from rag_pipeline.orchestration.source_registry import EMBEDDINGS, RAW, STAGES, SourceSpec
from rag_pipeline.orchestration.steps import (
    committing,
    complete_partition,
    document_stage,
    embeddings_output,
)
from rag_pipeline.resources.embedder import EmbedderResource
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.settings import load_settings
from rag_pipeline.store import index, stages
from rag_pipeline.store.locks import advisory_lock

KINDS = {"python", "postgres"}
RAW_VERSION = "1"
# Check names (constants, so tests and the UI agree on them).
NO_EDITORJS_SYNTAX = "no_editorjs_syntax"
NO_FORBIDDEN_CHARACTERS = "no_forbidden_characters"
CHUNKS_WITHIN_BUDGET = "chunks_within_token_budget"
INDEX_INTEGRITY = "index_integrity"
_PREVIEW_CHARS = 1500
_FETCH_BATCH = 50
OWNERS = ["team:knowledge-pipeline"]
# Concurrency pools (limits are set per deployment: `dagster instance concurrency set embedding
# 1`): one per source for its requests (a wiki is not hammered), one for the model.
EMBEDDING_POOL = "embedding"
# Transient source errors (a database restarting, a wiki down for longer than its client's own
# retries) are retried with backoff: 5 s, then 10 s. Short, because a permanent error (a wrong
# password) is retried too and `rag ingest` reports it only after the last attempt.
RAW_RETRY_POLICY = dg.RetryPolicy(
    max_retries=2, delay=5, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)


def requests_pool(spec: SourceSpec) -> str:
    """The concurrency pool of a source's raw stage (its requests to the source)."""
    return f"{spec.name}_requests"


def stage_tags(source_type: str, stage: str) -> dict[str, str]:
    """Tags of a stage asset: filter by source or stage in the UI (`tag:stage=embeddings`)."""
    return {"source": source_type, "stage": stage}


class IngestConfig(dg.Config):
    """Run configuration of every stage of a source's chain."""

    force: bool = False
    """Recompute every stage, even for unchanged documents (vectors still come from the cache)."""
    workers: int = 0
    """Processes for format conversion (0: RAG_WORKERS, else the CPU count, at most 8)."""


class SourceResource(dg.ConfigurableResource):
    """A source's configuration in Dagster; builds the source plug-in for a run."""

    @abstractmethod
    def build(self) -> Source:
        """The source, configured for this run."""

    @abstractmethod
    def partition_keys(self) -> list[str]:
        """The partitions the current configuration wants run (the CLI registers them)."""


def source_definitions(
    spec: SourceSpec,
    *,
    partitions_def: dg.PartitionsDefinition,
    resource: SourceResource,
    description: str,
    chain_options: ChainOptions | None = None,
) -> dg.Definitions:
    """The source system, the raw asset, the shared chain, its checks and the ingest job.

    Every name comes from `spec`: the resource is registered as `spec.resource_key`, the job is
    `spec.ingest_job`. The executor is not the job's: the code location sets one for every run
    (`defs/resources.py`), so runs launched from the asset catalog run the same way.
    """
    settings = load_settings()
    system = dg.AssetSpec(
        spec.system_key,
        description=spec.system_description,
        partitions_def=partitions_def,
        group_name=spec.group_name,
        kinds={"source"},
        owners=OWNERS,
        tags={"source": spec.name, "stage": "system"},
    )
    raw = _raw_asset(spec, partitions_def)
    chain = _chain(spec, partitions_def, chain_options or ChainOptions())
    job = dg.define_asset_job(
        spec.ingest_job,
        selection=dg.AssetSelection.assets(*(spec.asset_key(stage) for stage in STAGES)),
        description=description,
        # Enforced by run monitoring (the daemon): a hung run is stopped, not left running.
        run_tags=run_tags(settings),
    )
    return dg.Definitions(
        assets=[system, raw, *chain.assets],
        asset_checks=chain.checks,
        jobs=[job],
        resources={spec.resource_key: resource},
    )


def stage_metadata(summary: StageSummary, started: float, **extra: Any) -> dict[str, Any]:
    """What a person reads in the UI for a stage materialization."""
    metadata: dict[str, Any] = {
        **{f"documents_{name}": value for name, value in summary.counts().items()},
        "seconds": round(time.perf_counter() - started, 3),
        **extra,
    }
    if summary.failed:
        metadata["failures"] = dg.MetadataValue.md(failures_table(summary.failed))
    if summary.preview_key:
        text = summary.preview_text
        shown = text[:_PREVIEW_CHARS] + ("\n\n…" if len(text) > _PREVIEW_CHARS else "")
        metadata["preview"] = dg.MetadataValue.md(f"**{summary.preview_key}**\n\n{shown}")
        metadata["preview_document"] = summary.preview_key
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


def _rule_check(name: str, summary: StageSummary, stage: str, **extra: Any) -> dg.AssetCheckResult:
    """A per-document rule's result: the documents it rejected, a warning if any.

    Its spec is partitioned like its asset, so Dagster records the result on the partition the
    stage computed (the UI's check table shows it per partition).
    """
    rejected = [f for f in summary.failed if f.stage == stage and f.reason.startswith(name)]
    metadata: dict[str, Any] = {
        "documents_rejected": len(rejected),
        "rejected": ", ".join(f.source_id for f in rejected[:20]),
        **extra,
    }
    if rejected:
        metadata["reasons"] = dg.MetadataValue.md(failures_table(rejected, limit=5))
    return dg.AssetCheckResult(
        check_name=name,
        passed=not rejected,
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            f"{len(rejected)} documents rejected, first: {rejected[0].source_id}"
            if rejected
            else None
        ),
        metadata=metadata,
    )


def _rule_spec(
    name: str, asset: str, description: str, partitions_def: dg.PartitionsDefinition
) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(
        name, asset=asset, description=description, blocking=False, partitions_def=partitions_def
    )


# ---------------------------------------------------------------------------------------------
# raw


def _to_raw(source_type: str) -> Callable[[SourceDocument | FailedDocument], RawRecord]:
    def convert(item: SourceDocument | FailedDocument) -> RawRecord:
        if isinstance(item, FailedDocument):
            raise DocumentError(item.reason)
        info = DocumentInfo(
            source_type=source_type,
            source_id=item.source_id,
            language=item.language,
            title=item.title,
            original_format=SourceFormat(item.original_format),
            version=item.version,
            breadcrumb=item.breadcrumb,
            url=item.url,
            metadata=item.metadata,
        )
        return RawRecord(item.key, info, item.body.removeprefix("\ufeff"))

    return convert


def _raw_asset(spec: SourceSpec, partitions_def: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    source_type = spec.name
    resource_key = spec.resource_key
    asset_key = spec.asset_name(RAW)

    @dg.asset(
        name=asset_key,
        description=f"{source_type} documents as their source gave them, with their versions.",
        partitions_def=partitions_def,
        # The source system, observed by the source's sensor: the lineage starts there.
        deps=[spec.system_key],
        io_manager_key="stage_io_manager",
        # The source's resource key depends on the source: both come through the context.
        required_resource_keys={resource_key, "vectordb"},
        kinds=KINDS,
        group_name=spec.group_name,
        code_version=RAW_VERSION,
        retry_policy=RAW_RETRY_POLICY,
        pool=requests_pool(spec),
        owners=OWNERS,
        tags=stage_tags(source_type, RAW),
        metadata=stage_definition_metadata(source_type, RAW),
    )
    def raw_asset(
        context: dg.AssetExecutionContext, config: IngestConfig
    ) -> dg.MaterializeResult[StageOutput]:
        started = time.perf_counter()
        vectordb: VectorDBResource = context.resources.vectordb
        partition_key = context.partition_key
        source: Source = getattr(context.resources, resource_key).build()
        try:
            with vectordb.connect() as conn, advisory_lock(conn, source_type, partition_key, "raw"):
                refs: dict[str, DocumentRef] = {}
                listing_failed: list[FailedDocument] = []
                for item in source.list_documents(partition_key):
                    if isinstance(item, FailedDocument):
                        listing_failed.append(item)
                    else:
                        refs[item.key] = item
                previous = stages.input_hashes(
                    conn, asset_key, [*refs, *(f.source_id for f in listing_failed)]
                )
                work = plan(
                    {key: ref.version for key, ref in refs.items()},
                    previous,
                    f"raw:{RAW_VERSION}",
                    force=config.force,
                )
                context.log.info(f"raw: {len(work.todo)} to fetch, {len(work.kept)} unchanged")

                def fetch(keys: Sequence[str]) -> Iterator[tuple[str, Any]]:
                    for start in range(0, len(keys), _FETCH_BATCH):
                        batch = [refs[key] for key in keys[start : start + _FETCH_BATCH]]
                        for item in source.fetch(batch):
                            yield (
                                (item.key if isinstance(item, SourceDocument) else item.source_id),
                                item,
                            )

                summary = run_stage(
                    stage="raw",
                    work=work,
                    previous_inputs=previous,
                    load=fetch,
                    transform=_to_raw(source_type),
                    store=committing(conn, asset_key, context.run.run_id),
                )
                for failure in listing_failed:
                    summary.fail(failure.source_id, failure.reason, previous)
                failed_keys = {f.source_id for f in summary.failed}
                vanished = set(work.todo) - set(summary.written) - failed_keys
                # A document that fails keeps its place (and its previous version); one that
                # vanished between listing and fetch is gone.
                members = [key for key in refs if key not in vanished]
                members += [f.source_id for f in listing_failed if f.source_id in previous]
                completed = complete_partition(
                    conn,
                    asset_key=asset_key,
                    source_type=source_type,
                    partition_key=partition_key,
                    run_id=context.run.run_id,
                    failures=summary.failed,
                    members=members,
                )
        finally:
            source.close()
        return dg.MaterializeResult(
            value=StageOutput(source_type, partition_key, summary),
            metadata=stage_metadata(summary, started, documents_listed=len(refs), **completed),
        )

    return raw_asset


# ---------------------------------------------------------------------------------------------
# markdown → sanitized → chunks → embeddings


class _Chain:
    def __init__(
        self, assets: list[dg.AssetsDefinition], checks: list[dg.AssetChecksDefinition]
    ) -> None:
        self.assets = assets
        self.checks = checks


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


def _chain(
    spec: SourceSpec, partitions_def: dg.PartitionsDefinition, options: ChainOptions
) -> _Chain:
    """The markdown, sanitized, chunks and embeddings assets (and checks) of a source."""
    versions = document_stages.code_versions()
    source = spec.name
    key = spec.asset_name
    freshness = dg.FreshnessPolicy.time_window(
        fail_window=timedelta(hours=freshness_hours(load_settings(), source))
    )

    def stage_asset(stage: str, upstream: str, description: str, rule: str, about: str) -> Any:
        """The decorator of a document stage: one upstream stage, one per-document rule."""
        return dg.asset(
            name=key(stage),
            description=description,
            partitions_def=partitions_def,
            ins={"upstream": dg.AssetIn(key=key(upstream))},
            io_manager_key="stage_io_manager",
            kinds=KINDS,
            group_name=spec.group_name,
            code_version=versions[stage],
            automation_condition=DOWNSTREAM_AUTOMATION,
            owners=OWNERS,
            tags=stage_tags(source, stage),
            metadata=stage_definition_metadata(source, stage),
            check_specs=[_rule_spec(rule, key(stage), about, partitions_def)],
        )

    # The stage assets carry check_specs, so Dagster sees several outputs: it rejects a
    # `MaterializeResult[StageOutput]` annotation and reads a bare `MaterializeResult` as "no
    # value". Unannotated, they return a MaterializeResult whose value is a StageOutput.

    @stage_asset(
        "markdown",
        "raw",
        f"{source} documents as canonical Markdown, whatever their original format.",
        NO_EDITORJS_SYNTAX,
        "No Editor.js JSON structure (an object with `blocks`, or `type` + `data`) is "
        "left in the prose of a converted Editor.js document. A document breaking it is "
        "rejected (its previous version stays); prose that merely mentions the words "
        "passes.",
    )
    def markdown_asset(
        context: dg.AssetExecutionContext,
        config: IngestConfig,
        upstream: StageView,
        vectordb: VectorDBResource,
        embedder: EmbedderResource,
    ):  # no annotation: see the note above
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
            value=StageOutput(source, context.partition_key, done.summary),
            metadata=stage_metadata(done.summary, started, **done.metadata),
            check_results=[_rule_check(NO_EDITORJS_SYNTAX, done.summary, "markdown")],
        )

    @stage_asset(
        "sanitized",
        "markdown",
        f"{source} Markdown cleaned for storage and embedding (sanitizer rules).",
        NO_FORBIDDEN_CHARACTERS,
        "No NUL, C0/C1 control or lone surrogate is left in a sanitized document or its "
        "title. A document breaking it is rejected (its previous version stays).",
    )
    def sanitized_asset(
        context: dg.AssetExecutionContext,
        config: IngestConfig,
        upstream: StageView,
        vectordb: VectorDBResource,
    ):  # no annotation: see the note above
        started = time.perf_counter()
        totals: dict[str, int] = {}

        def sanitize(record: MarkdownRecord) -> SanitizedRecord:
            result = document_stages.sanitize_record(record)
            for rule, count in result.sanitize_counts.items():
                totals[rule] = totals.get(rule, 0) + count
            return result

        done = document_stage(
            context,
            upstream,
            vectordb,
            stage="sanitized",
            fingerprint=document_stages.sanitize_fingerprint(),
            force=config.force,
            transform=sanitize,
            reject=_forbidden,
        )
        return dg.MaterializeResult(
            value=StageOutput(source, context.partition_key, done.summary),
            metadata=stage_metadata(
                done.summary,
                started,
                **{f"sanitize_{rule}": count for rule, count in sorted(totals.items())},
                **done.metadata,
            ),
            check_results=[_rule_check(NO_FORBIDDEN_CHARACTERS, done.summary, "sanitized")],
        )

    @stage_asset(
        "chunks",
        "sanitized",
        f"{source} sections (parents) and token-bounded chunks to embed.",
        CHUNKS_WITHIN_BUDGET,
        "Every chunk fits the embedding model's maximum sequence length, so the model "
        "never silently truncates text. A document breaking it is rejected.",
    )
    def chunks_asset(
        context: dg.AssetExecutionContext,
        config: IngestConfig,
        upstream: StageView,
        vectordb: VectorDBResource,
        embedder: EmbedderResource,
    ):  # no annotation: see the note above
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
                model.count_tokens, settings, embedder.settings.max_convert_seconds
            ),
            reject=over_budget,
            preview=_chunks_preview,
        )
        return dg.MaterializeResult(
            value=StageOutput(source, context.partition_key, done.summary),
            metadata=stage_metadata(
                done.summary, started, chunks_computed=chunk_count, **done.metadata
            ),
            check_results=[
                _rule_check(
                    CHUNKS_WITHIN_BUDGET, done.summary, "chunks", max_tokens=settings.max_tokens
                )
            ],
        )

    @dg.asset(
        name=key("embeddings"),
        description=f"{source} chunks with their vectors: the searchable index (pgvector).",
        partitions_def=partitions_def,
        ins={"chunks": dg.AssetIn(key=key("chunks"))},
        io_manager_key="pgvector_io_manager",
        kinds={"python", "postgres", "pgvector"},
        group_name=spec.group_name,
        code_version=EMBEDDINGS_VERSION,
        automation_condition=DOWNSTREAM_AUTOMATION,
        pool=EMBEDDING_POOL,
        owners=OWNERS,
        tags=stage_tags(source, EMBEDDINGS),
        metadata=stage_definition_metadata(source, EMBEDDINGS),
        # The index is fresh when its last sync is within the window (RAG_FRESHNESS_HOURS).
        freshness_policy=freshness,
    )
    def embeddings_asset(
        context: dg.AssetExecutionContext,
        config: IngestConfig,
        chunks: StageView,
        vectordb: VectorDBResource,
        embedder: EmbedderResource,
    ) -> dg.MaterializeResult[IndexOutput]:
        # The vectors are made as the IO manager writes the rows: the figures of the run
        # (documents, chunks embedded, seconds) are its output metadata.
        output = embeddings_output(
            context,
            chunks,
            vectordb,
            embedder.embedder,
            force=config.force,
            describe_failures=failures_table,
        )
        return dg.MaterializeResult(value=output)

    @dg.asset_check(
        asset=embeddings_asset,
        name=INDEX_INTEGRITY,
        partitions_def=partitions_def,
        blocking=True,
        description="Every stored chunk of the partition's documents has a parent in its own "
        "document, a vector of the model's dimension and fits the model's sequence length: "
        "a breach means the stored index is wrong.",
    )
    def index_integrity(
        context: dg.AssetCheckExecutionContext,
        vectordb: VectorDBResource,
        embedder: EmbedderResource,
    ) -> dg.AssetCheckResult:
        model = embedder.embedder
        partition_key = partition_of(context)
        with vectordb.connect() as conn:
            counts = index.integrity_counts(
                conn, source, partition_key, model.dimension, model.max_tokens
            )
        broken = {name: value for name, value in counts.items() if name != "chunks" and value}
        return dg.AssetCheckResult(
            passed=not broken,
            description=f"{source}/{partition_key}: "
            + (", ".join(f"{name} {value}" for name, value in broken.items()) or "intact"),
            metadata={**counts, "partition": partition_key or ""},
        )

    failed = failed_documents_check(spec, partitions_def)
    return _Chain(
        [markdown_asset, sanitized_asset, chunks_asset, embeddings_asset],
        [index_integrity, failed],
    )
