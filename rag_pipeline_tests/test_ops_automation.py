"""Automation, checks and the `ingest_errors` report on real runs (PostgreSQL, the model)."""

from pathlib import Path

import dagster as dg
import psycopg
import pytest

from rag_pipeline.definitions import defs
from rag_pipeline.orchestration.pipeline import INDEX_INTEGRITY
from rag_pipeline.settings import Settings
from rag_pipeline_tests.pipeline_helpers import folder_partition, ingest, write

INTEGRITY = dg.AssetCheckKey(dg.AssetKey("files_embeddings"), INDEX_INTEGRITY)


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    write(
        folder,
        "guide.md",
        "# Guide\n\nHow to close a period in iDempiere.\n\n## Steps\n\nOpen it.\n",
    )
    return folder


def _register(instance: dg.DagsterInstance, folder: Path) -> str:
    key = folder_partition(folder)
    instance.add_dynamic_partitions("files_folders", [key])
    return key


# Raised inside Dagster's own automation tester (AssetSelection.all(include_sources=True)).
@pytest.mark.filterwarnings("ignore::dagster.BetaWarning")
def test_a_raw_materialized_alone_is_carried_downstream(rag_env: Settings, tmp_path: Path) -> None:
    definitions = defs()
    with dg.instance_for_test() as instance:
        key = _register(instance, _folder(tmp_path))
        # The sensor's previous tick: conditions compare with what it saw then.
        before = dg.evaluate_automation_conditions(defs=definitions, instance=instance)
        job = definitions.resolve_job_def("files_ingest_job")
        result = job.execute_in_process(
            instance=instance, partition_key=key, asset_selection=[dg.AssetKey("files_raw")]
        )
        assert result.success
        evaluation = dg.evaluate_automation_conditions(
            defs=definitions, instance=instance, cursor=before.cursor
        )
        # The rest of the chain, for that partition, in one run; nothing else moves.
        for stage in ("markdown", "sanitized", "chunks", "embeddings"):
            requested = evaluation.get_requested_partitions(dg.AssetKey(f"files_{stage}"))
            assert requested == {key}, stage
        assert not evaluation.get_requested_partitions(dg.AssetKey("files_raw"))
        assert not evaluation.get_requested_partitions(dg.AssetKey("wiki_markdown"))


def _run_integrity_check(instance: dg.DagsterInstance, key: str) -> dg.AssetCheckEvaluation:
    job = defs().resolve_job_def("files_ingest_job")
    subset = job.get_subset(asset_selection=set(), asset_check_selection={INTEGRITY})
    result = subset.execute_in_process(instance=instance, partition_key=key, raise_on_error=False)
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


def test_index_integrity_passes_then_blocks_on_an_over_long_chunk(
    rag_env: Settings, database_url: str, tmp_path: Path
) -> None:
    with dg.instance_for_test() as instance:
        folder = _folder(tmp_path)
        ingest(folder, instance)
        key = folder_partition(folder)
        assert _run_integrity_check(instance, key).passed
        # Crafted bad data: a stored chunk longer than the model reads (it would be truncated).
        with psycopg.connect(database_url) as conn:
            conn.execute("UPDATE rag.chunks SET token_count = 100000 WHERE ordinal = 0")
        evaluation = _run_integrity_check(instance, key)
        assert not evaluation.passed
        assert evaluation.blocking
        assert evaluation.metadata["chunks_over_max_tokens"].value == 1


def test_ingest_errors_lists_a_failed_document_with_its_reason(
    rag_env: Settings, tmp_path: Path
) -> None:
    folder = _folder(tmp_path)
    write(folder, "broken.md", b"# Broken\n\n\xff\xfe not UTF-8\n")
    definitions = defs()
    with dg.instance_for_test() as instance:
        ingest(folder, instance)
        # Resolved from the definitions, the asset carries its resources.
        result = dg.materialize(
            [definitions.resolve_assets_def("ingest_errors")], instance=instance
        )
        (materialization,) = result.asset_materializations_for_node("ingest_errors")
        metadata = {name: value.value for name, value in materialization.metadata.items()}
    assert metadata["failed_documents"] == 1
    assert "broken.md" in str(metadata["failures"])
    assert metadata["files_failed_documents"] == 1
    assert "| files |" in str(metadata["freshness"])
    assert "files_last_sync" in metadata


def test_files_sensor_requests_a_run_for_a_changed_folder_once(
    rag_env: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder(tmp_path)
    monkeypatch.setenv("RAG_FILES_FOLDERS", str(folder))
    definitions = defs()
    sensor = definitions.resolve_sensor_def("files_folders_sensor")
    resources = {"files_source": (definitions.resources or {})["files_source"]}
    with dg.instance_for_test() as instance:
        key = _register(instance, folder)
        first = sensor(dg.build_sensor_context(instance=instance, resources=resources))
        assert isinstance(first, dg.SensorResult)
        second = sensor(
            dg.build_sensor_context(instance=instance, resources=resources, cursor=first.cursor)
        )
        assert isinstance(second, dg.SensorResult)
    assert [request.partition_key for request in first.run_requests or []] == [key]
    assert not second.run_requests
