"""The `files` source: a folder of .md, .html, Editor.js .json and .txt files."""

import time

import dagster as dg

from rag_pipeline.chain import KINDS, build_chain, is_forced, stage_metadata
from rag_pipeline.core.incremental import StageOutput
from rag_pipeline.core.sources.files import SOURCE_TYPE, read_folder
from rag_pipeline.defs.files.partitions import files_folders
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.store import stages


@dg.asset(
    partitions_def=files_folders,
    io_manager_key="stage_io_manager",
    kinds=KINDS,
    group_name=SOURCE_TYPE,
)
def files_raw(
    context: dg.AssetExecutionContext, vectordb: VectorDBResource
) -> dg.MaterializeResult[StageOutput]:
    """The folder's files as read: text, format and content hash, unchanged."""
    started = time.perf_counter()
    with vectordb.connect() as conn:
        _, previous = stages.stored_hashes(conn, "files_raw", context.partition_key)
    output = read_folder(
        context.partition_key,
        previous,
        max_bytes=vectordb.settings().files_max_bytes,
        force=is_forced(context),
    )
    return dg.MaterializeResult(value=output, metadata=stage_metadata(output, started))


files_markdown, files_sanitized, files_chunks, files_embeddings, files_index_integrity = (
    build_chain(SOURCE_TYPE, files_folders)
)
