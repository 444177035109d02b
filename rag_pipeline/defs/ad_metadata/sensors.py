"""The ad_metadata sensor: runs the entity type × language partitions whose rows changed."""

import dagster as dg

from rag_pipeline.defs.ad_metadata.partitions import ad_languages, ad_metadata_partitions
from rag_pipeline.defs.ad_metadata.resources import ADSourceResource
from rag_pipeline.defs.idempiere import changed_partitions
from rag_pipeline.orchestration.source_registry import AD_METADATA
from rag_pipeline.sources.idempiere.ad import parse_partition_key


@dg.sensor(
    job_name=AD_METADATA.ingest_job,
    description="Runs each entity type × language partition whose Application Dictionary "
    "rows changed (a change token per partition); registers the configured languages.",
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
    tokens = ad_metadata_source.change_tokens()
    languages = [parse_partition_key(key).language for key in tokens]
    return changed_partitions(
        context, AD_METADATA, tokens, languages, ad_languages, ad_metadata_partitions
    )
