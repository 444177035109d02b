"""The nightly full reconcile: one schedule per source, on `RAG_NIGHTLY_CRON` in `RAG_TIMEZONE`.

Each schedule launches its source's `<source>_reconcile_job`, which registers the partitions
the configuration wants and runs every one of them (see `jobs.py`): documents that changed,
appeared or disappeared without a sensor noticing are caught once a night. Stopped by default
in local development; `RAG_AUTOMATION=true` (production) starts them with the daemon.
"""

import dagster as dg

from rag_pipeline.orchestration.source_registry import SOURCES, reconcile_job_name
from rag_pipeline.settings import load_settings


def nightly_schedule(source: str, cron: str, timezone: str, running: bool) -> dg.ScheduleDefinition:
    """The nightly reconcile schedule of one source."""
    return dg.ScheduleDefinition(
        name=f"{source}_nightly_reconcile",
        job_name=reconcile_job_name(source),
        cron_schedule=cron,
        execution_timezone=timezone,
        description=f"Reconcile every partition of {source} with its source, nightly.",
        tags={"rag/trigger": "nightly"},
        default_status=(
            dg.DefaultScheduleStatus.RUNNING if running else dg.DefaultScheduleStatus.STOPPED
        ),
    )


@dg.definitions
def schedules() -> dg.Definitions:
    """A nightly reconcile schedule per source."""
    settings = load_settings()
    return dg.Definitions(
        schedules=[
            nightly_schedule(source, settings.nightly_cron, settings.timezone, settings.automation)
            for source in SOURCES
        ]
    )
