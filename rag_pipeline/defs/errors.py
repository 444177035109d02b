"""`ingest_errors`: failed documents across every source, and how many are behind per source.

One place in the UI to act from: which documents failed (with the stage and the reason) as
the newest run of their partition left them. When each source last synced is Dagster's own
freshness (each index's `FreshnessPolicy`, windows in `RAG_FRESHNESS_HOURS`), shown on the
assets and in the catalog; each partition's failures are its `no_failed_documents` check. The
table itself is `rag.ingest_errors`; `rag status` prints the same figures.
"""

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import dagster as dg
import psycopg

from rag_pipeline.orchestration.source_registry import EMBEDDINGS, SOURCES
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.store.reports import CurrentFailure, current_failures, source_freshness

INGEST_ERRORS = "ingest_errors"
_TABLE_ROWS = 50

# After any source's index changed (a run of any partition), once no run is going on.
_AFTER_ANY_INDEX_UPDATE = (
    dg.AutomationCondition.any_deps_updated().since_last_handled()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
)


@dg.asset(
    name=INGEST_ERRORS,
    deps=[spec.asset_key(EMBEDDINGS) for spec in SOURCES],
    group_name="operations",
    kinds={"postgres"},
    owners=["team:knowledge-pipeline"],
    tags={"stage": "report"},
    automation_condition=_AFTER_ANY_INDEX_UPDATE,
)
def ingest_errors(vectordb: VectorDBResource) -> dg.MaterializeResult:
    """Documents that failed, with stage and reason; per source, failed and behind counts."""
    with vectordb.connect() as conn:
        return dg.MaterializeResult(metadata=ingest_errors_metadata(conn))


def ingest_errors_metadata(conn: psycopg.Connection) -> dict[str, Any]:
    """The report's figures as the store holds them now (`rag ingest` records them too)."""
    failures = current_failures(conn)
    metadata: dict[str, Any] = {
        "failed_documents": len(failures),
        "failures": dg.MetadataValue.md(failures_markdown(failures)),
    }
    for item in source_freshness(conn):
        metadata[f"{item.source_type}_failed_documents"] = item.failed_documents
        metadata[f"{item.source_type}_documents_behind"] = item.documents_behind
    return metadata


def failures_markdown(failures: Sequence[CurrentFailure]) -> str:
    """The failed documents as a Markdown table (the first 50)."""
    if not failures:
        return "No failed documents."
    lines = [
        "| source | partition | document | stage | reason |",
        "| --- | --- | --- | --- | --- |",
    ]
    for failure in failures[:_TABLE_ROWS]:
        reason = failure.reason.replace("|", "\\|").replace("\n", " ")[:300]
        lines.append(
            f"| {failure.source_type} | `{failure.partition_key}` | `{failure.source_id}` "
            f"| {failure.stage} | {reason} |"
        )
    if len(failures) > _TABLE_ROWS:
        lines.append(f"| … | | | | {len(failures) - _TABLE_ROWS} more |")
    return "\n".join(lines)


def age(delta: timedelta) -> str:
    """A short, human age: `42 s`, `17 min`, `5 h`, `3 d`."""
    seconds = max(int(delta.total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"
