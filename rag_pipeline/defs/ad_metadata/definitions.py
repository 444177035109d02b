"""The `ad_metadata` source: its assets, checks and job, built by the shared pipeline."""

import dagster as dg

from rag_pipeline.defs.ad_metadata.partitions import ad_metadata_partitions
from rag_pipeline.defs.ad_metadata.resources import ADSourceResource
from rag_pipeline.orchestration.pipeline import source_definitions
from rag_pipeline.orchestration.source_registry import AD_METADATA
from rag_pipeline.settings import load_settings
from rag_pipeline.sources.idempiere.ad import ADSource


@dg.definitions
def ad_metadata() -> dg.Definitions:
    """The Application Dictionary, one partition per entity type and language."""
    return source_definitions(
        AD_METADATA,
        partitions_def=ad_metadata_partitions,
        resource=ADSourceResource.from_settings(load_settings()),
        description="Read the iDempiere Application Dictionary into the search index.",
        chain_options=ADSource.chain_options,
    )
