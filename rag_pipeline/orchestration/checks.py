"""Checks that judge one partition, and the freshness windows of the sources' indexes.

Every check is a partitioned asset check of its own: it runs after each run of the source's
job, and alone from the UI (Checks → Execute, on a partition). The stage rules
(`no_editorjs_syntax`, `no_forbidden_characters`, `chunks_within_token_budget`) are enforced
by their stages, which reject a breaking document and record why; their checks read those
records from the stage's latest materialization of the partition and warn, naming the
partition, the count and the first documents. `no_failed_documents` does the same for every
stage; `index_integrity` reads the stored index itself and blocks.
"""

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from rag_pipeline.core.models import FailedDocument
from rag_pipeline.orchestration.source_registry import EMBEDDINGS, STAGES, SourceSpec
from rag_pipeline.resources.embedder import EmbedderResource
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.settings import Settings
from rag_pipeline.store import index
from rag_pipeline.store.runs import run_errors

# Check names (constants, so stages, tests and the UI agree on them).
FAILED_DOCUMENTS = "no_failed_documents"
INDEX_INTEGRITY = "index_integrity"
NO_EDITORJS_SYNTAX = "no_editorjs_syntax"
NO_FORBIDDEN_CHARACTERS = "no_forbidden_characters"
CHUNKS_WITHIN_BUDGET = "chunks_within_token_budget"
_SHOWN = 5


@dataclass(frozen=True)
class StageRule:
    """A per-document rule a stage enforces; its rejections start with the rule's name."""

    name: str
    stage: str
    description: str


STAGE_RULES = (
    StageRule(
        NO_EDITORJS_SYNTAX,
        "markdown",
        "No Editor.js JSON structure (an object with `blocks`, or `type` + `data`) is left in "
        "the prose of a converted Editor.js document. A document breaking it is rejected (its "
        "previous version stays); prose that merely mentions the words passes.",
    ),
    StageRule(
        NO_FORBIDDEN_CHARACTERS,
        "sanitized",
        "No NUL, C0/C1 control or lone surrogate is left in a sanitized document or its "
        "title. A document breaking it is rejected (its previous version stays).",
    ),
    StageRule(
        CHUNKS_WITHIN_BUDGET,
        "chunks",
        "Every chunk fits the embedding model's maximum sequence length, so the model never "
        "silently truncates text. A document breaking it is rejected.",
    ),
)

# Partitioned asset checks are a preview in Dagster 1.13, chosen knowingly (a check must say
# which partition it judged): its warning would be printed at every load of the code location.
warnings.filterwarnings(
    "ignore",
    message="Specifying a partitions_def on an AssetCheckSpec",
    category=dg.PreviewWarning,
)


def partition_of(context: dg.AssetCheckExecutionContext) -> str | None:
    """The partition a check judges (None when run without one, e.g. on every partition)."""
    return context.partition_key if context.has_partition_key else None


def _judged_partition(context: dg.AssetCheckExecutionContext, check: str) -> str:
    partition_key = partition_of(context)
    if partition_key is None:
        raise dg.Failure(f"{check} judges one partition: run it on a partition")
    return partition_key


def latest_run_ids(
    instance: dg.DagsterInstance,
    spec: SourceSpec,
    partition_key: str,
    stages: Sequence[str] = STAGES,
) -> dict[str, str]:
    """stage → the run of that stage's latest materialization of the partition."""
    runs: dict[str, str] = {}
    for stage in stages:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=spec.asset_key(stage), asset_partitions=[partition_key]
            ),
            limit=1,
        ).records
        if records:
            runs[stage] = records[0].run_id
    return runs


def partition_failures(
    instance: dg.DagsterInstance,
    vectordb: VectorDBResource,
    spec: SourceSpec,
    partition_key: str,
    stages: Sequence[str] = STAGES,
) -> list[FailedDocument]:
    """The documents of the partition that a stage rejected in its latest materialization."""
    failures: list[FailedDocument] = []
    with vectordb.connect() as conn:
        for stage, run_id in latest_run_ids(instance, spec, partition_key, stages).items():
            failures += [
                FailedDocument(source_id, failed_stage, reason)
                for partition, source_id, failed_stage, reason in run_errors(conn, run_id)
                if partition == partition_key and failed_stage == stage
            ]
    return failures


def failures_result(
    spec: SourceSpec,
    partition_key: str,
    failures: Sequence[FailedDocument],
    verb: str = "failed",
) -> dg.AssetCheckResult:
    """WARN naming the partition, the count and the first documents with their reasons."""
    documents = sorted({failure.source_id for failure in failures})
    first = [f"{f.source_id} ({f.stage}): {f.reason[:200]}" for f in failures[:_SHOWN]]
    description = (
        f"{spec.name}/{partition_key}: {len(documents)} documents {verb}; first: "
        + "; ".join(first)
        if failures
        else f"{spec.name}/{partition_key}: no document {verb}"
    )
    return dg.AssetCheckResult(
        passed=not failures,
        severity=dg.AssetCheckSeverity.WARN,
        description=description,
        metadata={
            "partition": partition_key,
            f"documents_{verb}": len(documents),
            "documents": ", ".join(documents[:20]),
            "first_reasons": dg.MetadataValue.md("\n".join(f"- {line}" for line in first) or "–"),
        },
    )


def failed_documents_check(
    spec: SourceSpec, partitions_def: dg.PartitionsDefinition
) -> dg.AssetChecksDefinition:
    """The partitioned `no_failed_documents` check on a source's index."""

    @dg.asset_check(
        asset=spec.asset_key(EMBEDDINGS),
        name=FAILED_DOCUMENTS,
        partitions_def=partitions_def,
        blocking=False,
        description="No document of the partition failed at any stage in that stage's latest "
        "run. A failed document keeps its previous version in the index; this warns with "
        "the count and the first documents and reasons.",
    )
    def failed_documents(
        context: dg.AssetCheckExecutionContext, vectordb: VectorDBResource
    ) -> dg.AssetCheckResult:
        partition_key = _judged_partition(context, FAILED_DOCUMENTS)
        failures = partition_failures(context.instance, vectordb, spec, partition_key)
        return failures_result(spec, partition_key, failures)

    return failed_documents


def stage_rule_check(
    spec: SourceSpec, rule: StageRule, partitions_def: dg.PartitionsDefinition
) -> dg.AssetChecksDefinition:
    """The partitioned check of one stage rule: the documents the stage rejected for it."""

    @dg.asset_check(
        asset=spec.asset_key(rule.stage),
        name=rule.name,
        partitions_def=partitions_def,
        blocking=False,
        description=rule.description,
    )
    def stage_rule(
        context: dg.AssetCheckExecutionContext, vectordb: VectorDBResource
    ) -> dg.AssetCheckResult:
        partition_key = _judged_partition(context, rule.name)
        failures = partition_failures(
            context.instance, vectordb, spec, partition_key, stages=[rule.stage]
        )
        rejected = [f for f in failures if f.reason.startswith(rule.name)]
        return failures_result(spec, partition_key, rejected, verb="rejected")

    return stage_rule


def index_integrity_check(
    spec: SourceSpec, partitions_def: dg.PartitionsDefinition
) -> dg.AssetChecksDefinition:
    """The blocking check that the stored index of a partition is well-formed."""

    @dg.asset_check(
        asset=spec.asset_key(EMBEDDINGS),
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
                conn, spec.name, partition_key, model.dimension, model.max_tokens
            )
        broken = {name: value for name, value in counts.items() if name != "chunks" and value}
        return dg.AssetCheckResult(
            passed=not broken,
            description=f"{spec.name}/{partition_key}: "
            + (", ".join(f"{name} {value}" for name, value in broken.items()) or "intact"),
            metadata={**counts, "partition": partition_key or ""},
        )

    return index_integrity


def source_checks(
    spec: SourceSpec, partitions_def: dg.PartitionsDefinition
) -> list[dg.AssetChecksDefinition]:
    """Every check of a source's chain."""
    return [
        *(stage_rule_check(spec, rule, partitions_def) for rule in STAGE_RULES),
        index_integrity_check(spec, partitions_def),
        failed_documents_check(spec, partitions_def),
    ]


def freshness_hours(settings: Settings, source: str) -> float:
    """The freshness window of a source's index, in hours (RAG_FRESHNESS_HOURS)."""
    return settings.freshness_windows().get(source, settings.freshness_windows()[""])
