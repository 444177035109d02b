"""The `wiki` source: its assets, checks and job, built by the shared pipeline."""

import dagster as dg

from rag_pipeline.defs.wiki.partitions import wiki_partitions
from rag_pipeline.defs.wiki.resources import WikiSourceResource
from rag_pipeline.orchestration.pipeline import source_definitions
from rag_pipeline.orchestration.source_registry import WIKI
from rag_pipeline.settings import load_settings
from rag_pipeline.sources.wiki.source import WikiSource


@dg.definitions
def wiki() -> dg.Definitions:
    """MediaWiki pages, one partition per configured category (or per XML export)."""
    return source_definitions(
        WIKI,
        partitions_def=wiki_partitions,
        resource=WikiSourceResource.from_settings(load_settings()),
        description="Read wiki pages (by category, title or XML export) into the search index.",
        chain_options=WikiSource.chain_options,
    )
