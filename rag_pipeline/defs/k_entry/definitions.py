"""The `k_entry` source: its assets, checks and job, built by the shared pipeline."""

import dagster as dg

from rag_pipeline.defs.k_entry.partitions import k_entry_languages
from rag_pipeline.defs.k_entry.resources import KEntrySourceResource
from rag_pipeline.orchestration.pipeline import source_definitions
from rag_pipeline.orchestration.source_registry import K_ENTRY
from rag_pipeline.settings import load_settings
from rag_pipeline.sources.idempiere.k_entry import KEntrySource


@dg.definitions
def k_entry() -> dg.Definitions:
    """Knowledge-base entries of the iDempiere database, one partition per language."""
    return source_definitions(
        K_ENTRY,
        partitions_def=k_entry_languages,
        resource=KEntrySourceResource.from_settings(load_settings()),
        description="Read iDempiere knowledge-base entries (K_Entry) into the search index.",
        chain_options=KEntrySource.chain_options,
    )
