"""Automation, checks, the executor and the `ingest_errors` report on real runs (PostgreSQL,
the model)."""

import logging
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import psycopg
import pytest
import yaml
from dagster._core.definitions.reconstruct import ReconstructableRepository

from rag_pipeline.definitions import defs
from rag_pipeline.orchestration.checks import FAILED_DOCUMENTS, INDEX_INTEGRITY
from rag_pipeline.orchestration.executors import instance_yaml
from rag_pipeline.orchestration.listing import list_partition, why_run
from rag_pipeline.orchestration.raw_asset import RAW_FINGERPRINT
from rag_pipeline.orchestration.reconcile import DATA_VERSION_TAG
from rag_pipeline.orchestration.source_registry import FILES, RAW, STAGES
from rag_pipeline.settings import Settings
from rag_pipeline_tests.pipeline_helpers import folder_partition, ingest, write

pytestmark = pytest.mark.integration

INTEGRITY = dg.AssetCheckKey(FILES.asset_key("embeddings"), INDEX_INTEGRITY)
DOWNSTREAM = [FILES.asset_key(stage) for stage in STAGES if stage != RAW]


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
            instance=instance, partition_key=key, asset_selection=[dg.AssetKey(["files", "raw"])]
        )
        assert result.success
        evaluation = dg.evaluate_automation_conditions(
            defs=definitions, instance=instance, cursor=before.cursor
        )
        # The rest of the chain, for that partition, in one run; nothing else moves.
        for stage in ("markdown", "sanitized", "chunks", "embeddings"):
            requested = evaluation.get_requested_partitions(dg.AssetKey(["files", stage]))
            assert requested == {key}, stage
        assert not evaluation.get_requested_partitions(dg.AssetKey(["files", "raw"]))
        assert not evaluation.get_requested_partitions(dg.AssetKey(["wiki", "markdown"]))


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
    # When a source last synced is Dagster's freshness policy now, not this report's.
    assert "freshness" not in metadata
    policy = definitions.resolve_asset_graph().get(FILES.asset_key("embeddings")).freshness_policy
    assert isinstance(policy, dg.FreshnessPolicy)


def test_the_failed_documents_check_warns_naming_its_partition_and_runs_alone(
    rag_env: Settings, tmp_path: Path
) -> None:
    folder = _folder(tmp_path)
    write(folder, "broken.md", b"# Broken\n\n\xff\xfe not UTF-8\n")
    key = folder_partition(folder)
    check_key = dg.AssetCheckKey(FILES.asset_key("embeddings"), FAILED_DOCUMENTS)
    with dg.instance_for_test() as instance:
        ingest(folder, instance)
        # Executed alone, as from the UI's check page, on the partition.
        job = defs().resolve_job_def(FILES.ingest_job)
        subset = job.get_subset(asset_selection=set(), asset_check_selection={check_key})
        result = subset.execute_in_process(instance=instance, partition_key=key)
    (evaluation,) = result.get_asset_check_evaluations()
    assert not evaluation.passed
    assert evaluation.severity == dg.AssetCheckSeverity.WARN
    assert evaluation.partition == key
    assert evaluation.metadata["partition"].value == key
    assert evaluation.metadata["documents_failed"].value == 1
    assert evaluation.description is not None
    assert f"files/{key}: 1 documents failed" in evaluation.description
    assert "broken.md" in evaluation.description


# Raised inside Dagster's own automation tester (AssetSelection.all(include_sources=True)).
@pytest.mark.filterwarnings("ignore::dagster.BetaWarning")
def test_turning_automation_on_catches_up_a_partition_left_behind(
    rag_env: Settings, tmp_path: Path
) -> None:
    definitions = defs()
    with dg.instance_for_test() as instance:
        key = _register(instance, _folder(tmp_path))
        job = definitions.resolve_job_def(FILES.ingest_job)
        # Automation off: the raw stage is materialized alone (as from the catalog) and
        # nothing carries it on.
        assert job.execute_in_process(
            instance=instance, partition_key=key, asset_selection=[FILES.asset_key(RAW)]
        ).success
        # Automation turned on: its first tick has no history of that materialization.
        first = dg.evaluate_automation_conditions(defs=definitions, instance=instance)
        for asset_key in DOWNSTREAM:
            assert first.get_requested_partitions(asset_key) == {key}, asset_key
        assert not first.get_requested_partitions(FILES.asset_key(RAW))
        # The requested run (one, the whole rest of the chain) brings the index up to date.
        assert job.execute_in_process(
            instance=instance, partition_key=key, asset_selection=DOWNSTREAM
        ).success
        embeddings = instance.get_latest_storage_id_by_partition(
            FILES.asset_key("embeddings"), dg.DagsterEventType.ASSET_MATERIALIZATION
        )
        raw = instance.get_latest_storage_id_by_partition(
            FILES.asset_key(RAW), dg.DagsterEventType.ASSET_MATERIALIZATION
        )
        assert embeddings[key] > raw[key]
        after = dg.evaluate_automation_conditions(
            defs=definitions, instance=instance, cursor=first.cursor
        )
        assert not any(after.get_requested_partitions(asset_key) for asset_key in DOWNSTREAM)


def test_a_catalog_materialization_runs_in_process_under_the_run_timeout(
    rag_env: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    record_property: Callable[[str, object], None],
) -> None:
    """The implicit asset job, as the UI's Materialize launches it, on the instance's limits."""
    monkeypatch.setenv("RAG_RUN_TIMEOUT_SECONDS", "5400")
    folder = _folder(tmp_path)
    key = folder_partition(folder)
    recon = ReconstructableRepository.for_module("rag_pipeline.definitions", "defs")
    implicit = recon.get_reconstructable_job("__ASSET_JOB")
    overrides = yaml.safe_load(instance_yaml())
    with dg.instance_for_test(overrides=overrides) as instance:
        _register(instance, folder)
        timings: list[float] = []
        for _ in range(2):  # the second run finds the partition unchanged
            started = time.perf_counter()
            with dg.execute_job(
                implicit,
                instance=instance,
                tags={"dagster/partition": key},
                asset_selection=[FILES.asset_key(stage) for stage in STAGES],
            ) as result:
                assert result.success
                run_id = result.run_id
            timings.append(time.perf_counter() - started)
        run = instance.get_run_by_id(run_id)
        assert run is not None
        assert run.job_name == "__ASSET_JOB"
        messages = [
            record.event_log_entry.message
            for record in instance.get_records_for_run(
                run_id, of_type=dg.DagsterEventType.ENGINE_EVENT
            ).records
        ]
        assert any("in process" in message for message in messages), messages
        assert not any("multiprocess" in message for message in messages)
        # A run without the tag is stopped by run monitoring after the instance's default.
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_max_runtime_seconds == 5400
    # Shown with `-o log_cli=true`, and in the JUnit report (`record_property`).
    logging.getLogger(__name__).info(
        "catalog materialization: first %.1f s, unchanged %.1f s", *timings
    )
    record_property("catalog_materialization_unchanged_seconds", round(timings[1], 1))


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


def test_every_run_observes_its_source_system_and_an_unchanged_listing_needs_no_run(
    rag_env: Settings, database_url: str, tmp_path: Path
) -> None:
    definitions = defs()
    graph = definitions.resolve_asset_graph()
    code_versions = {stage: graph.get(FILES.asset_key(stage)).code_version for stage in STAGES}
    source = dict(definitions.resources or {})[FILES.resource_key].build()
    folder = _folder(tmp_path)
    with dg.instance_for_test() as instance, psycopg.connect(database_url) as conn:
        key = folder_partition(folder)
        listing = list_partition(source, key)
        assert why_run(instance, code_versions, conn, FILES, key, listing, RAW_FINGERPRINT)
        ingest(folder, instance)
        # The run's raw step observed the folder as it listed it, sensors or not.
        (observed,) = instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=FILES.system_key, asset_partitions=[key]), limit=5
        ).records
        observation = observed.asset_observation
        assert observation is not None
        assert observation.tags[DATA_VERSION_TAG] == listing.data_version
        assert observation.metadata["documents_listed"].value == 1
        # Nothing changed: no run needed. An edit, or a stage's new code version: a run.
        assert why_run(instance, code_versions, conn, FILES, key, listing, RAW_FINGERPRINT) is None
        newer = {**code_versions, "markdown": "another"}
        assert why_run(instance, newer, conn, FILES, key, listing, RAW_FINGERPRINT) == (
            "markdown code version changed"
        )
        write(folder, "guide.md", "# Guide\n\nHow to open a period, now.\n")
        edited = list_partition(source, key)
        assert edited.data_version != listing.data_version
        assert why_run(instance, code_versions, conn, FILES, key, edited, RAW_FINGERPRINT) == (
            "1 documents new or changed"
        )


def test_checks_run_without_a_partition_judge_each_partition_as_its_own(
    rag_env: Settings, tmp_path: Path
) -> None:
    folder = _folder(tmp_path)
    key = folder_partition(folder)
    failed_key = dg.AssetCheckKey(FILES.asset_key("embeddings"), FAILED_DOCUMENTS)
    with dg.instance_for_test() as instance:
        ingest(folder, instance)
        # What the UI's "Execute all" on the index launches: the checks, no partition.
        job = defs().resolve_job_def(FILES.ingest_job)
        subset = job.get_subset(
            asset_selection=set(), asset_check_selection={INTEGRITY, failed_key}
        )
        result = subset.execute_in_process(instance=instance)
        assert result.success
    evaluations = {(e.check_name, e.partition): e for e in result.get_asset_check_evaluations()}
    assert set(evaluations) == {(INDEX_INTEGRITY, key), (FAILED_DOCUMENTS, key)}
    assert all(e.passed for e in evaluations.values())
    integrity = evaluations[INDEX_INTEGRITY, key]
    chunks = integrity.metadata[f"chunks [{key}]"].value
    assert isinstance(chunks, int)
    assert chunks > 0
    # A passing check shows no empty rows.
    failed = evaluations[FAILED_DOCUMENTS, key]
    assert failed.metadata[f"documents_failed [{key}]"].value == 0
    assert "documents" not in failed.metadata
    assert "first_reasons" not in failed.metadata
