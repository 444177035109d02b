"""Checks that judge one partition, and the freshness windows of the sources' indexes.

Every check is a partitioned asset check of its own. It runs after each run of the source's
job, on that run's partition. Dagster 1.13 cannot run a partitioned check alone on one
partition from the UI (its *Execute* button is disabled on a partitioned asset), so:

- a run of the check with no partition (the UI's *Execute all*) judges every materialized
  partition and records one result per partition, each as that partition's evaluation;
- `rag check --source S --partition P` runs the checks alone on one partition (a run of the
  source's job with only the checks selected, tagged with the partition).

A partition with nothing to judge records no result (Dagster shows the check *skipped*) and
the run's log says why. The stage rules (`no_editorjs_syntax`, `no_forbidden_characters`,
`chunks_within_token_budget`) are enforced by their stages, which reject a breaking document
and record why; their checks read those records from the stage's latest materialization of
the partition and warn, naming the partition, the count and the first documents.
`no_failed_documents` does the same for every stage; `index_integrity` reads the stored index
itself and blocks.
"""

import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

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


# What judges one partition: its result, or None when the partition holds nothing to judge.
Judge = Callable[[str], dg.AssetCheckResult | None]
CheckEvents = Iterator[dg.AssetCheckResult | dg.AssetCheckEvaluation]


def judged_partitions(
    context: dg.AssetCheckExecutionContext, check_key: dg.AssetCheckKey, judge: Judge
) -> CheckEvents:
    """The run's partition judged; without one, every materialized partition, one by one.

    Without a partition, a result returned as such would be taken for the whole asset, and
    Dagster 1.13 fails building it for a partitioned asset ("Cannot access partition_key for
    a non-partitioned run"); each partition's result is recorded as that partition's
    evaluation instead. A partition with nothing to judge records nothing: the check shows
    as skipped, and the log says why.
    """
    partition_key = partition_of(context)
    keys = (
        [partition_key]
        if partition_key is not None
        else sorted(context.instance.get_materialized_partitions(check_key.asset_key))
    )
    if not keys:
        context.log.info(f"{check_key.name}: no partition materialized yet, nothing to judge")
    for key in keys:
        result = judge(key)
        if result is None:
            context.log.info(f"{check_key.name}: nothing to judge in {key}: skipped")
        elif partition_key is not None:
            yield result
        else:
            yield dg.AssetCheckEvaluation(
                asset_key=check_key.asset_key,
                check_name=check_key.name,
                passed=result.passed,
                metadata=result.metadata,
                severity=result.severity,
                description=result.description,
                blocking=_blocking(context, check_key),
                partition=key,
            )


def _blocking(context: dg.AssetCheckExecutionContext, check_key: dg.AssetCheckKey) -> bool:
    spec = next((s for s in context.check_specs if s.key == check_key), None)
    return bool(spec and spec.blocking)


def partition_check(
    spec: SourceSpec,
    partitions_def: dg.PartitionsDefinition,
    *,
    stage: str,
    name: str,
    description: str,
    blocking: bool,
) -> dg.AssetCheckSpec:
    """The spec of a partitioned check on one stage of a source's chain."""
    return dg.AssetCheckSpec(
        name,
        asset=spec.asset_key(stage),
        partitions_def=partitions_def,
        blocking=blocking,
        description=description,
    )


def check_op_name(check_spec: dg.AssetCheckSpec) -> str:
    """The op of a check, named as `@dg.asset_check` names it (`files__embeddings_...`)."""
    return f"{check_spec.asset_key.to_python_identifier()}_{check_spec.name}"


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
) -> list[FailedDocument] | None:
    """The documents of the partition that a stage rejected in its latest materialization.

    None when no stage of `stages` was materialized for the partition: nothing to judge.
    """
    runs = latest_run_ids(instance, spec, partition_key, stages)
    if not runs:
        return None
    failures: list[FailedDocument] = []
    with vectordb.connect() as conn:
        for stage, run_id in runs.items():
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
    """WARN naming the partition, the count and the first documents with their reasons.

    The count is also under a key naming the partition, so the UI plots each partition's
    own line rather than one line through every partition's runs.
    """
    documents = sorted({failure.source_id for failure in failures})
    first = [f"{f.source_id} ({f.stage}): {f.reason[:200]}" for f in failures[:_SHOWN]]
    metadata: dict[str, Any] = {
        "partition": partition_key,
        f"documents_{verb}": len(documents),
        per_partition(f"documents_{verb}", partition_key): len(documents),
    }
    if failures:
        metadata["documents"] = ", ".join(documents[:20])
        metadata["first_reasons"] = dg.MetadataValue.md("\n".join(f"- {line}" for line in first))
    return dg.AssetCheckResult(
        passed=not failures,
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            f"{spec.name}/{partition_key}: {len(documents)} documents {verb}; first: "
            + "; ".join(first)
            if failures
            else f"{spec.name}/{partition_key}: no document {verb}"
        ),
        metadata=metadata,
    )


def per_partition(name: str, partition_key: str) -> str:
    """A metadata key for one partition's figure (`chunks [window|en_US]`)."""
    return f"{name} [{partition_key}]"


def failed_documents_check(
    spec: SourceSpec, partitions_def: dg.PartitionsDefinition
) -> dg.AssetChecksDefinition:
    """The partitioned `no_failed_documents` check on a source's index."""
    check_spec = partition_check(
        spec,
        partitions_def,
        stage=EMBEDDINGS,
        name=FAILED_DOCUMENTS,
        blocking=False,
        description="No document of the partition failed at any stage in that stage's latest "
        "run. A failed document keeps its previous version in the index; this warns with "
        "the count and the first documents and reasons.",
    )

    # can_subset: a partition with nothing to judge yields no result (shown as skipped).
    @dg.multi_asset_check(specs=[check_spec], can_subset=True, name=check_op_name(check_spec))
    def failed_documents(
        context: dg.AssetCheckExecutionContext, vectordb: VectorDBResource
    ) -> CheckEvents:
        def judge(partition_key: str) -> dg.AssetCheckResult | None:
            failures = partition_failures(context.instance, vectordb, spec, partition_key)
            return None if failures is None else failures_result(spec, partition_key, failures)

        yield from judged_partitions(context, check_spec.key, judge)

    return failed_documents


def stage_rule_check(
    spec: SourceSpec, rule: StageRule, partitions_def: dg.PartitionsDefinition
) -> dg.AssetChecksDefinition:
    """The partitioned check of one stage rule: the documents the stage rejected for it."""
    check_spec = partition_check(
        spec,
        partitions_def,
        stage=rule.stage,
        name=rule.name,
        blocking=False,
        description=rule.description,
    )

    @dg.multi_asset_check(specs=[check_spec], can_subset=True, name=check_op_name(check_spec))
    def stage_rule(
        context: dg.AssetCheckExecutionContext, vectordb: VectorDBResource
    ) -> CheckEvents:
        def judge(partition_key: str) -> dg.AssetCheckResult | None:
            failures = partition_failures(
                context.instance, vectordb, spec, partition_key, stages=[rule.stage]
            )
            if failures is None:
                return None
            rejected = [f for f in failures if f.reason.startswith(rule.name)]
            return failures_result(spec, partition_key, rejected, verb="rejected")

        yield from judged_partitions(context, check_spec.key, judge)

    return stage_rule


def index_integrity_check(
    spec: SourceSpec, partitions_def: dg.PartitionsDefinition
) -> dg.AssetChecksDefinition:
    """The blocking check that the stored index of a partition is well-formed."""
    check_spec = partition_check(
        spec,
        partitions_def,
        stage=EMBEDDINGS,
        name=INDEX_INTEGRITY,
        blocking=True,
        description="Every stored chunk of the partition's documents has a parent in its own "
        "document, a vector of the model's dimension and fits the model's sequence length: "
        "a breach means the stored index is wrong. A partition with no chunk warns.",
    )

    @dg.multi_asset_check(specs=[check_spec], can_subset=True, name=check_op_name(check_spec))
    def index_integrity(
        context: dg.AssetCheckExecutionContext,
        vectordb: VectorDBResource,
        embedder: EmbedderResource,
    ) -> CheckEvents:
        model = embedder.embedder

        def judge(partition_key: str) -> dg.AssetCheckResult:
            with vectordb.connect() as conn:
                counts = index.integrity_counts(
                    conn, spec.name, partition_key, model.dimension, model.max_tokens
                )
            return integrity_result(spec, partition_key, counts)

        yield from judged_partitions(context, check_spec.key, judge)

    return index_integrity


def integrity_result(
    spec: SourceSpec, partition_key: str, counts: dict[str, int]
) -> dg.AssetCheckResult:
    """Blocks on a breach; warns, not passes, when the partition holds no chunk to judge."""
    chunks = counts.pop("chunks")
    broken = {name: value for name, value in counts.items() if value}
    metadata: dict[str, Any] = {
        "partition": partition_key,
        per_partition("chunks", partition_key): chunks,
        **counts,
    }
    if not chunks:
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.WARN,
            description=f"{spec.name}/{partition_key}: no chunk stored, nothing to judge",
            metadata=metadata,
        )
    return dg.AssetCheckResult(
        passed=not broken,
        description=f"{spec.name}/{partition_key}: "
        + (
            ", ".join(f"{name} {value}" for name, value in broken.items())
            or f"{chunks} chunks intact"
        ),
        metadata=metadata,
    )


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
