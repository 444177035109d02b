"""The code location loads, and its asset graph is the documented chain."""

import itertools

import dagster as dg

from rag_pipeline.core.stages import GLOSSARY, STAGES, op_name, stored_name
from rag_pipeline.definitions import defs
from rag_pipeline.orchestration.checks import (
    CHUNKS_WITHIN_BUDGET,
    NO_EDITORJS_SYNTAX,
    NO_FORBIDDEN_CHARACTERS,
)
from rag_pipeline.orchestration.source_registry import SOURCES, step_label


def test_definitions_are_loadable() -> None:
    dg.Definitions.validate_loadable(defs())


def test_files_chain_lineage() -> None:
    graph = defs().resolve_asset_graph()
    chain = [
        dg.AssetKey(["files", stage])
        for stage in ("raw", "markdown", "sanitized", "chunks", "embeddings")
    ]
    for upstream, downstream in itertools.pairwise(chain):
        assert graph.get(downstream).parent_keys == {upstream}
        assert graph.get(downstream).group_name == "files"


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


def test_stages_have_code_versions_and_checks_have_descriptions() -> None:
    graph = defs().resolve_asset_graph()
    for stage in ("raw", "markdown", "sanitized", "chunks", "embeddings"):
        assert graph.get(dg.AssetKey(["files", stage])).code_version
    for check_key in graph.asset_check_keys:
        assert graph.get_check_spec(check_key).description, check_key


def test_force_and_workers_are_run_config_shown_in_the_launchpad() -> None:
    job = defs().resolve_job_def("files_ingest_job")
    fields = job.run_config_schema.config_type.fields["ops"].config_type.fields
    raw_config = fields["files__raw"].config_type.fields["config"].config_type.fields
    assert {"force", "workers"} <= set(raw_config)
    resources = job.run_config_schema.config_type.fields["resources"].config_type.fields
    embedder = resources["embedder"].config_type.fields["config"].config_type.fields
    assert {"model", "batch_tokens", "chunk_target_tokens"} <= set(embedder)


def test_every_sensor_and_schedule_has_a_description() -> None:
    definitions = defs()
    automations = [*(definitions.sensors or []), *(definitions.schedules or [])]
    assert len(automations) >= 5
    for automation in automations:
        assert automation.description, automation.name


def test_the_bundled_demo_files_are_versioned_by_content() -> None:
    from rag_pipeline.sources.files import DEMO_PARTITION, FilesSource

    source = FilesSource(max_bytes=1_000_000, folders=lambda _: None)
    versions = [ref.version for ref in source.list_documents(DEMO_PARTITION)]  # type: ignore[union-attr]
    assert len(versions) == 9
    assert all(version.startswith("sha256:") for version in versions)


def test_each_stage_op_is_labelled_by_its_asset_key() -> None:
    definitions = defs()
    for spec in SOURCES:
        stages = (*STAGES, GLOSSARY) if spec.glossary else STAGES
        for stage in stages:
            key = spec.glossary_key if stage == GLOSSARY else spec.asset_key(stage)
            assert key.path == [spec.name, stage]
            op = definitions.resolve_assets_def(key).op.name
            assert op == op_name(spec.name, stage)
            assert step_label(op) == key.to_user_string() == stored_name(spec.name, stage)
    assert step_label("ingest_errors") == "ingest_errors"
