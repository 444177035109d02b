"""Jobs: one ingest job per source (each source has its own partitions)."""

import dagster as dg

from rag_pipeline.defs.files.partitions import files_folders

files_ingest_job = dg.define_asset_job(
    "files_ingest_job",
    selection=dg.AssetSelection.groups("files"),
    partitions_def=files_folders,
    description="Read a folder and bring its documents into the search index.",
)
