"""The `files` source: its assets, checks and job, built by the shared pipeline."""

import dagster as dg

from rag_pipeline.defs.files.partitions import files_folders
from rag_pipeline.defs.files.resources import FilesSourceResource
from rag_pipeline.orchestration.pipeline import source_definitions
from rag_pipeline.orchestration.source_registry import FILES
from rag_pipeline.settings import load_settings
from rag_pipeline.sources.files import CHAIN_OPTIONS


@dg.definitions
def files() -> dg.Definitions:
    """Folders of documents, one partition per folder."""
    return source_definitions(
        FILES,
        partitions_def=files_folders,
        resource=FilesSourceResource.from_settings(load_settings()),
        description="Read a folder and bring its documents into the search index.",
        chain_options=CHAIN_OPTIONS,
    )
