"""The k_entry sensor: runs the languages whose entries changed (max(Updated) and content)."""

import dagster as dg

from rag_pipeline.defs.idempiere import changed_partitions
from rag_pipeline.defs.k_entry.partitions import k_entry_languages
from rag_pipeline.defs.k_entry.resources import KEntrySourceResource
from rag_pipeline.orchestration.source_registry import K_ENTRY


@dg.sensor(
    job_name=K_ENTRY.ingest_job,
    description="Runs each language whose K_Entry rows changed (a change token per language: "
    "count, newest Updated, digest of the versions); registers the configured languages.",
    minimum_interval_seconds=300,
    # Polls a production ERP: someone turns it on deliberately.
    default_status=dg.DefaultSensorStatus.STOPPED,
)
def k_entry_changes_sensor(
    context: dg.SensorEvaluationContext, k_entry_source: KEntrySourceResource
) -> dg.SensorResult:
    """Registers the configured languages and runs each one whose entries changed.

    Each language's change token (entry count, newest Updated, digest of the versions) is kept
    in the cursor, so a tick over an unchanged knowledge base requests nothing.
    """
    tokens = k_entry_source.change_tokens()
    return changed_partitions(
        context, K_ENTRY, tokens, list(tokens), k_entry_languages, k_entry_languages
    )
