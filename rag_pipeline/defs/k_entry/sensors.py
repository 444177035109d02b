"""The k_entry sensor: runs the languages whose entries changed (max(Updated) and content)."""

import json

import dagster as dg

from rag_pipeline.defs.k_entry.partitions import k_entry_languages
from rag_pipeline.defs.k_entry.resources import KEntrySourceResource


@dg.sensor(
    job_name="k_entry_ingest_job",
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
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    source = k_entry_source.build()
    try:
        tokens = {key: source.change_token(key) for key in source.partition_keys()}
    finally:
        source.close()
    registered = set(context.instance.get_dynamic_partitions(k_entry_languages.name or ""))
    new = [key for key in tokens if key not in registered]
    changed = [key for key, token in tokens.items() if seen.get(key) != token]
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(partition_key=key, run_key=f"{key}:{tokens[key]}") for key in changed
        ],
        dynamic_partitions_requests=[k_entry_languages.build_add_request(new)] if new else [],
        cursor=json.dumps({**seen, **tokens}, sort_keys=True),
    )
