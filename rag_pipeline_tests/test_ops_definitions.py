"""The production wiring: jobs, schedules, sensors, automation, executors, retries, pools."""

import datetime
from pathlib import Path

import dagster as dg
import pytest
import yaml

from rag_pipeline.definitions import defs
from rag_pipeline.defs.automation import AUTOMATION_SENSOR
from rag_pipeline.orchestration.executors import instance_yaml
from rag_pipeline.orchestration.source_registry import FILES, RAW, SOURCES
from rag_pipeline.settings import Settings
from rag_pipeline.sources import files
from rag_pipeline.sources.idempiere import ad, k_entry
from rag_pipeline.sources.wiki import source as wiki

STAGES = ("markdown", "sanitized", "chunks", "embeddings")


def test_definitions_load() -> None:
    dg.Definitions.validate_loadable(defs())


def test_the_registry_names_each_plugin_by_its_source_type() -> None:
    plugins = (files.SOURCE_TYPE, wiki.SOURCE_TYPE, k_entry.SOURCE_TYPE, ad.SOURCE_TYPE)
    assert tuple(spec.name for spec in SOURCES) == plugins


def test_a_partitioned_job_per_source_and_no_job_that_starts_runs() -> None:
    from rag_pipeline.orchestration.quality import QUALITY_JOB

    definitions = defs()
    names = {job.name for job in definitions.resolve_all_job_defs()}
    glossaries = {spec.glossary_job for spec in SOURCES if spec.glossary}
    ingest_jobs = {spec.ingest_job for spec in SOURCES}
    assert names == {"__ASSET_JOB", QUALITY_JOB, *ingest_jobs, *glossaries}
    for spec in SOURCES:
        job = definitions.resolve_job_def(spec.ingest_job)
        assert job.partitions_def is not None
        # The source system is upstream of the raw stage, observed, never materialized.
        graph = definitions.resolve_asset_graph()
        assert graph.get(spec.asset_key(RAW)).parent_keys == {spec.system_key}
        assert not graph.get(spec.system_key).is_materializable
        if spec.glossary:
            # The glossary reads the source system, per language, after the raw stage.
            glossary = graph.get(spec.glossary_key)
            assert glossary.parent_keys == {spec.system_key, spec.asset_key(RAW)}
            assert glossary.automation_condition is not None
            glossary_job = definitions.resolve_job_def(spec.glossary_job)
            assert isinstance(glossary_job.partitions_def, dg.DynamicPartitionsDefinition)


def test_downstream_stages_catch_up_and_raw_retries_with_backoff() -> None:
    graph = defs().resolve_asset_graph()
    for spec in SOURCES:
        raw = graph.get(spec.asset_key(RAW))
        assert raw.automation_condition is None  # sensors and schedules drive the sources
        assets_def = defs().resolve_assets_def(spec.asset_key(RAW))
        policy = assets_def.op.retry_policy
        assert policy is not None
        assert policy.max_retries >= 1
        assert policy.backoff == dg.Backoff.EXPONENTIAL
        assert assets_def.op.pool == f"{spec.name}_requests"
        for stage in STAGES:
            node = graph.get(spec.asset_key(stage))
            assert node.automation_condition is not None
            assert node.automation_condition.get_label() == "eager_or_catch_up", (spec, stage)
            assert node.owners
            assert node.tags["source"] == spec.name
        assert defs().resolve_assets_def(spec.asset_key("embeddings")).op.pool == "embedding"


def test_every_run_carries_a_run_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_RUN_TIMEOUT_SECONDS", "7200")
    definitions = defs()
    for spec in SOURCES:
        assert definitions.resolve_job_def(spec.ingest_job).run_tags["dagster/max_runtime"] == (
            "7200"
        )
    sensor = definitions.resolve_sensor_def(AUTOMATION_SENSOR)
    assert isinstance(sensor, dg.AutomationConditionSensorDefinition)
    assert sensor.run_tags["dagster/max_runtime"] == "7200"


def test_the_instance_limits_runs_no_definition_tags(monkeypatch: pytest.MonkeyPatch) -> None:
    """Catalog materializations and backfills: the instance's default timeout and pools."""
    monkeypatch.setenv("RAG_RUN_TIMEOUT_SECONDS", "3600")
    monkeypatch.setenv("RAG_EMBEDDING_CONCURRENCY", "2")
    config = yaml.safe_load(instance_yaml())
    with dg.instance_for_test(overrides=config) as instance:
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_max_runtime_seconds == 3600
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 2


@pytest.mark.parametrize("name", ["in_process", "multiprocess", "celery"])
def test_the_executor_is_chosen_by_a_setting(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    if name == "celery":
        pytest.importorskip("dagster_celery", reason="dagster-celery (the celery extra) missing")
    monkeypatch.setenv("RAG_EXECUTOR", name)
    definitions = defs()
    # The code location's executor: the catalog's implicit asset job runs with it too.
    assert definitions.resolve_implicit_global_asset_job_def().executor_def.name == name
    for spec in SOURCES:
        assert definitions.resolve_job_def(spec.ingest_job).executor_def.name == name


def test_nightly_schedules_follow_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_NIGHTLY_CRON", "15 3 * * *")
    monkeypatch.setenv("RAG_TIMEZONE", "Europe/Bratislava")
    definitions = defs()
    for spec in SOURCES:
        schedule = definitions.resolve_schedule_def(spec.nightly_schedule)
        assert schedule.cron_schedule == "15 3 * * *"
        assert schedule.execution_timezone == "Europe/Bratislava"
        assert schedule.job_name == spec.ingest_job
        assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED


def test_the_nightly_schedule_requests_a_run_per_partition_and_starts_none(
    rag_env: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folders = [tmp_path / "handbook", tmp_path / "notes"]
    for folder in folders:
        folder.mkdir()
    monkeypatch.setenv("RAG_FILES_FOLDERS", ":".join(str(folder) for folder in folders))
    definitions = defs()
    resource = (definitions.resources or {})[FILES.resource_key]
    configured = list(resource.partition_keys())
    assert len(configured) == 2
    schedule = definitions.resolve_schedule_def(FILES.nightly_schedule)
    with dg.instance_for_test() as instance:
        # A folder ingested before and no longer configured is reconciled too.
        instance.add_dynamic_partitions("files_folders", ["retired"])
        instance.report_runless_asset_event(
            dg.AssetMaterialization(FILES.asset_key(RAW), partition="retired")
        )
        context = dg.build_schedule_context(
            instance=instance,
            scheduled_execution_time=datetime.datetime(2026, 1, 5, 3, 15),
            repository_def=definitions.get_repository_def(),
            resources={FILES.resource_key: resource},
        )
        data = schedule.evaluate_tick(context)
        requests = data.run_requests or []
        assert [request.partition_key for request in requests] == [*configured, "retired"]
        assert {request.job_name for request in requests} <= {None, FILES.ingest_job}
        assert all(request.tags["rag/trigger"] == "nightly" for request in requests)
        assert len({request.run_key for request in requests}) == len(requests)
        # The configured folders were registered, and nothing ran: Dagster launches them.
        assert set(instance.get_dynamic_partitions("files_folders")) == {*configured, "retired"}
        assert instance.get_runs() == []


def test_automation_is_off_in_local_dev_and_on_in_production(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sensor = defs().resolve_sensor_def(AUTOMATION_SENSOR)
    assert isinstance(sensor, dg.AutomationConditionSensorDefinition)
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
    monkeypatch.setenv("RAG_AUTOMATION", "true")
    definitions = defs()
    assert definitions.resolve_sensor_def(AUTOMATION_SENSOR).default_status == (
        dg.DefaultSensorStatus.RUNNING
    )
    for spec in SOURCES:
        schedule = definitions.resolve_schedule_def(spec.nightly_schedule)
        assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING


def test_ingest_errors_lists_every_source_embeddings_as_upstream() -> None:
    graph = defs().resolve_asset_graph()
    node = graph.get(dg.AssetKey("ingest_errors"))
    assert node.parent_keys == {spec.asset_key("embeddings") for spec in SOURCES}
    assert node.automation_condition is not None
