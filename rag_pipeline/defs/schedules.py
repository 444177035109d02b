"""The nightly full reconcile: one schedule per source, on `RAG_NIGHTLY_CRON` in `RAG_TIMEZONE`.

Each tick returns one `RunRequest` of the source's ingest job per partition: the ones the
configuration wants (their dynamic parts added first) and every one ingested before. Dagster
launches them through its run queue and run launcher, under the instance's concurrency limits
(one embedding step at a time by default, see `orchestration/executors.py`); no run starts
another. Documents that changed, appeared or disappeared without a sensor noticing are caught
once a night. Stopped by default in local development; `RAG_AUTOMATION=true` (production)
starts them with the daemon.
"""

import dagster as dg

from rag_pipeline.orchestration.pipeline import SourceResource
from rag_pipeline.orchestration.reconcile import reconcile_partitions, reconcile_requests, register
from rag_pipeline.orchestration.source_registry import SOURCES, SourceSpec
from rag_pipeline.settings import load_settings

TRIGGER_TAG = "rag/trigger"


def nightly_schedule(
    spec: SourceSpec, cron: str, timezone: str, running: bool
) -> dg.ScheduleDefinition:
    """The nightly reconcile schedule of one source: a run per partition."""

    @dg.schedule(
        name=spec.nightly_schedule,
        job_name=spec.ingest_job,
        cron_schedule=cron,
        execution_timezone=timezone,
        required_resource_keys={spec.resource_key},
        description=f"Reconcile every partition of {spec.name} with its source, nightly: "
        "one run per partition.",
        default_status=(
            dg.DefaultScheduleStatus.RUNNING if running else dg.DefaultScheduleStatus.STOPPED
        ),
    )
    def nightly(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest] | dg.SkipReason:
        resource: SourceResource = getattr(context.resources, spec.resource_key)
        if context.repository_def is None:
            raise dg.DagsterInvariantViolationError("the schedule needs its code location")
        job = context.repository_def.get_job(spec.ingest_job)
        keys = reconcile_partitions(spec, resource.partition_keys(), context.instance)
        # A schedule cannot return dynamic partition requests as a sensor does: a partition
        # (a configured folder, category or language) is added before its run is requested.
        register(job.partitions_def, keys, context.instance)
        if not keys:
            return dg.SkipReason(f"{spec.name}: no partition configured or ingested")
        return reconcile_requests(spec, keys, {TRIGGER_TAG: "nightly"})

    return nightly


@dg.definitions
def schedules() -> dg.Definitions:
    """A nightly reconcile schedule per source."""
    settings = load_settings()
    return dg.Definitions(
        schedules=[
            nightly_schedule(spec, settings.nightly_cron, settings.timezone, settings.automation)
            for spec in SOURCES
        ]
    )
