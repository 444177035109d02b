"""How every run of the code location executes: the executor, the run tags, the run limits.

The executor is set once for the code location (`Definitions(executor=...)` in
`defs/resources.py`), so the project's jobs, the runs launched from the asset catalog
(Dagster's implicit `__ASSET_JOB`), automation, sensor and schedule runs and backfills all use
it. Chosen by `RAG_EXECUTOR` when the definitions load:

- `in_process` (default): the steps of one partition are short, so a process per step would
  cost more than the work; an unchanged partition finishes in seconds from the UI.
- `multiprocess`: Dagster's own multiprocess executor, one process per step on this machine.
- `celery`: `dagster-celery` (the optional `celery` extra); steps go to Celery workers on any
  machine that reaches the broker (`RAG_CELERY_BROKER`, RabbitMQ or Redis), the Dagster
  instance (`DAGSTER_HOME`, Postgres for several machines) and the vector database.

The executor is the only thing that changes: assets, resources and jobs are the same code.
"""

import os

import dagster as dg

from rag_pipeline.settings import Settings, load_settings

EXECUTORS = ("in_process", "multiprocess", "celery")
MAX_RUNTIME_TAG = "dagster/max_runtime"


class ExecutorUnavailableError(RuntimeError):
    """The configured executor's package is not installed."""


def job_executor(settings: Settings | None = None) -> dg.ExecutorDefinition:
    """The executor named by `RAG_EXECUTOR`, configured from the settings."""
    settings = settings or load_settings()
    if settings.executor == "multiprocess":
        return dg.multiprocess_executor
    if settings.executor == "celery":
        return celery_executor(settings)
    return dg.in_process_executor


def run_tags(settings: Settings | None = None) -> dict[str, str]:
    """Tags every run the code location starts carries (its jobs, schedules, automation).

    `dagster/max_runtime` is enforced by run monitoring (the daemon): a hung run is stopped.
    Runs Dagster starts from its implicit asset job (the catalog's Materialize, backfills)
    carry no definition's tags; `instance_yaml` gives them the same limit as the instance's
    default.
    """
    settings = settings or load_settings()
    return {MAX_RUNTIME_TAG: str(settings.run_timeout_seconds)}


def instance_yaml(settings: Settings | None = None) -> str:
    """The `dagster.yaml` part that limits every run of the instance, whoever started it.

    - `run_monitoring.max_runtime_seconds`: the run timeout of runs without the tag (a
      catalog materialization, a backfill), the same `RAG_RUN_TIMEOUT_SECONDS`;
    - `concurrency.pools.default_limit`: steps running at once in each pool, so the queued
      runs of many partitions embed one at a time (`RAG_EMBEDDING_CONCURRENCY`) and each
      source is read by one run at a time (its `<source>_requests` pool).
    """
    settings = settings or load_settings()
    monitoring = (
        f"run_monitoring:\n  enabled: true\n  max_runtime_seconds: {settings.run_timeout_seconds}\n"
    )
    if settings.embedding_concurrency is None:
        return monitoring
    return (
        f"{monitoring}concurrency:\n  pools:\n    default_limit: {settings.embedding_concurrency}\n"
    )


def celery_executor(settings: Settings | None = None) -> dg.ExecutorDefinition:
    """dagster-celery's executor on the broker and backend of `RAG_CELERY_BROKER/BACKEND`.

    A URL set in the environment is read when a run starts (`env:`), so a password in it never
    shows in the UI; unset, the local default applies. Workers must use the same broker.
    """
    settings = settings or load_settings()
    try:
        from dagster_celery import celery_executor as executor  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ExecutorUnavailableError(
            "RAG_EXECUTOR=celery needs dagster-celery: pip install 'rag_pipeline[celery]'"
        ) from exc
    return executor.configured(
        {
            "broker": _env_or("RAG_CELERY_BROKER", settings.celery_broker),
            "backend": _env_or("RAG_CELERY_BACKEND", settings.celery_backend),
        },
        name="celery",
    )


def _env_or(variable: str, default: str) -> object:
    return {"env": variable} if os.environ.get(variable) else default
