"""Checks that judge one partition, and the freshness windows of the sources' indexes.

`failed_documents` is a partitioned asset check on a source's index: it runs after each run of
the source's job, and alone from the UI (Checks → Execute, on a partition). It reads which
documents each stage of the partition rejected in that stage's latest materialization, and
warns with the count and the first reasons, naming the partition.
"""

import warnings
from collections.abc import Sequence

import dagster as dg

from rag_pipeline.core.models import FailedDocument
from rag_pipeline.orchestration.source_registry import EMBEDDINGS, STAGES, SourceSpec
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.settings import Settings
from rag_pipeline.store.runs import run_errors

FAILED_DOCUMENTS = "no_failed_documents"
_SHOWN = 5

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


def latest_run_ids(
    instance: dg.DagsterInstance, spec: SourceSpec, partition_key: str
) -> dict[str, str]:
    """stage → the run of that stage's latest materialization of the partition."""
    runs: dict[str, str] = {}
    for stage in STAGES:
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
    instance: dg.DagsterInstance, vectordb: VectorDBResource, spec: SourceSpec, partition_key: str
) -> list[FailedDocument]:
    """The documents of the partition that a stage rejected in its latest materialization."""
    failures: list[FailedDocument] = []
    with vectordb.connect() as conn:
        for stage, run_id in latest_run_ids(instance, spec, partition_key).items():
            failures += [
                FailedDocument(source_id, failed_stage, reason)
                for partition, source_id, failed_stage, reason in run_errors(conn, run_id)
                if partition == partition_key and failed_stage == stage
            ]
    return failures


def failures_result(
    spec: SourceSpec, partition_key: str, failures: Sequence[FailedDocument]
) -> dg.AssetCheckResult:
    """WARN naming the partition, the count and the first documents with their reasons."""
    documents = sorted({failure.source_id for failure in failures})
    first = [f"{f.source_id} ({f.stage}): {f.reason[:200]}" for f in failures[:_SHOWN]]
    description = (
        f"{spec.name}/{partition_key}: {len(documents)} documents failed; first: "
        + "; ".join(first)
        if failures
        else f"{spec.name}/{partition_key}: no document failed"
    )
    return dg.AssetCheckResult(
        passed=not failures,
        severity=dg.AssetCheckSeverity.WARN,
        description=description,
        metadata={
            "partition": partition_key,
            "documents_failed": len(documents),
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
        partition_key = partition_of(context)
        if partition_key is None:
            raise dg.Failure(f"{FAILED_DOCUMENTS} judges one partition: run it on a partition")
        failures = partition_failures(context.instance, vectordb, spec, partition_key)
        return failures_result(spec, partition_key, failures)

    return failed_documents


def freshness_hours(settings: Settings, source: str) -> float:
    """The freshness window of a source's index, in hours (RAG_FRESHNESS_HOURS)."""
    return settings.freshness_windows().get(source, settings.freshness_windows()[""])
