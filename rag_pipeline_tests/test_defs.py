"""The code location loads, and its asset graph is the documented chain."""

import itertools

import dagster as dg

from rag_pipeline.chain import CHUNKS_WITHIN_BUDGET, NO_EDITORJS_SYNTAX, NO_FORBIDDEN_CHARACTERS
from rag_pipeline.definitions import defs


def test_definitions_are_loadable() -> None:
    dg.Definitions.validate_loadable(defs())


def test_files_chain_lineage() -> None:
    graph = defs().resolve_asset_graph()
    chain = ["files_raw", "files_markdown", "files_sanitized", "files_chunks", "files_embeddings"]
    for upstream, downstream in itertools.pairwise(chain):
        parents = graph.get(dg.AssetKey(downstream)).parent_keys
        assert parents == {dg.AssetKey(upstream)}


def test_checks_are_declared() -> None:
    check_keys = {key.name for key in defs().resolve_asset_graph().asset_check_keys}
    assert {
        NO_EDITORJS_SYNTAX,
        NO_FORBIDDEN_CHARACTERS,
        CHUNKS_WITHIN_BUDGET,
        "index_integrity",
    } <= (check_keys)


def test_ingest_job_is_partitioned_by_folder() -> None:
    job = defs().resolve_job_def("files_ingest_job")
    assert isinstance(job.partitions_def, dg.DynamicPartitionsDefinition)
    assert job.partitions_def.name == "files_folders"
