"""The ad_metadata sensor: runs the entity type × language partitions whose rows changed."""

import json

import dagster as dg

from rag_pipeline.defs.ad_metadata.partitions import ad_languages
from rag_pipeline.defs.ad_metadata.resources import ADSourceResource
from rag_pipeline.sources.idempiere.ad import parse_partition_key


@dg.sensor(
    job_name="ad_metadata_ingest_job",
    minimum_interval_seconds=900,
    # Polls a production ERP: someone turns it on deliberately.
    default_status=dg.DefaultSensorStatus.STOPPED,
)
def ad_metadata_changes_sensor(
    context: dg.SensorEvaluationContext, ad_metadata_source: ADSourceResource
) -> dg.SensorResult:
    """Registers the configured languages and runs each partition whose dictionary changed.

    A partition's change token (documents, max(Updated) of their rows, active child rows) is
    kept in the cursor: a tick over an unchanged dictionary requests nothing.
    """
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    source = ad_metadata_source.build()
    try:
        tokens = {key: source.change_token(key) for key in source.partition_keys()}
    finally:
        source.close()
    languages = list(dict.fromkeys(parse_partition_key(key).language for key in tokens))
    registered = set(context.instance.get_dynamic_partitions(ad_languages.name or ""))
    new = [language for language in languages if language not in registered]
    changed = [key for key, token in tokens.items() if seen.get(key) != token]
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(partition_key=key, run_key=f"{key}:{tokens[key]}") for key in changed
        ],
        dynamic_partitions_requests=[ad_languages.build_add_request(new)] if new else [],
        cursor=json.dumps({**seen, **tokens}, sort_keys=True),
    )
