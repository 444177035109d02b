"""Which Dagster executor the jobs use: chosen by `RAG_EXECUTOR` when the definitions load.

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
