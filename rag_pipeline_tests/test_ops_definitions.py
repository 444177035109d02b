"""The production wiring: jobs, schedules, sensors, automation, executors, retries, pools."""

import datetime

import dagster as dg
import pytest

from rag_pipeline.definitions import defs
from rag_pipeline.defs.automation import AUTOMATION_SENSOR
from rag_pipeline.orchestration.source_registry import SOURCES

STAGES = ("markdown", "sanitized", "chunks", "embeddings")


def test_definitions_load() -> None:
    dg.Definitions.validate_loadable(defs())


def test_ingest_all_and_a_job_per_source() -> None:
    definitions = defs()
    ingest_all = definitions.resolve_job_def("ingest_all")
    assert {node.name for node in ingest_all.graph.nodes} == {f"reconcile_{s}" for s in SOURCES}
    for source in SOURCES:
        assert definitions.resolve_job_def(f"{source}_ingest_job").partitions_def is not None
        assert definitions.resolve_job_def(f"{source}_reconcile_job").partitions_def is None


def test_downstream_stages_are_eager_and_raw_retries_with_backoff() -> None:
    graph = defs().resolve_asset_graph()
    for source in SOURCES:
        raw = graph.get(dg.AssetKey(f"{source}_raw"))
        assert raw.automation_condition is None  # sensors and schedules drive the sources
        assets_def = defs().resolve_assets_def(f"{source}_raw")
        policy = assets_def.op.retry_policy
        assert policy is not None
        assert policy.max_retries >= 1
        assert policy.backoff == dg.Backoff.EXPONENTIAL
        assert assets_def.op.pool == f"{source}_requests"
        for stage in STAGES:
            node = graph.get(dg.AssetKey(f"{source}_{stage}"))
            assert node.automation_condition is not None
            assert node.automation_condition.get_label() == "eager", (source, stage)
            assert node.owners
            assert node.tags["source"] == source
        assert defs().resolve_assets_def(f"{source}_embeddings").op.pool == "embedding"


def test_jobs_carry_a_run_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_RUN_TIMEOUT_SECONDS", "7200")
    definitions = defs()
    for name in ("ingest_all", "files_ingest_job", "wiki_reconcile_job"):
        assert definitions.resolve_job_def(name).run_tags["dagster/max_runtime"] == "7200"


@pytest.mark.parametrize("name", ["in_process", "multiprocess", "celery"])
def test_the_executor_is_chosen_by_a_setting(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    if name == "celery":
        pytest.importorskip("dagster_celery", reason="dagster-celery (the celery extra) missing")
    monkeypatch.setenv("RAG_EXECUTOR", name)
    definitions = defs()
    for job_name in ("ingest_all", "files_ingest_job", "k_entry_ingest_job"):
        assert definitions.resolve_job_def(job_name).executor_def.name == name


def test_nightly_schedules_follow_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_NIGHTLY_CRON", "15 3 * * *")
    monkeypatch.setenv("RAG_TIMEZONE", "Europe/Bratislava")
    definitions = defs()
    for source in SOURCES:
        schedule = definitions.resolve_schedule_def(f"{source}_nightly_reconcile")
        assert schedule.cron_schedule == "15 3 * * *"
        assert schedule.execution_timezone == "Europe/Bratislava"
        assert schedule.job_name == f"{source}_reconcile_job"
        assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
        context = dg.build_schedule_context(
            scheduled_execution_time=datetime.datetime(2026, 1, 5, 3, 15)
        )
        data = schedule.evaluate_tick(context)
        assert data.run_requests is not None
        (request,) = data.run_requests
        assert request.tags["rag/trigger"] == "nightly"


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
    for source in SOURCES:
        schedule = definitions.resolve_schedule_def(f"{source}_nightly_reconcile")
        assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING


def test_ingest_errors_lists_every_source_embeddings_as_upstream() -> None:
    graph = defs().resolve_asset_graph()
    node = graph.get(dg.AssetKey("ingest_errors"))
    assert node.parent_keys == {dg.AssetKey(f"{s}_embeddings") for s in SOURCES}
    assert node.automation_condition is not None
