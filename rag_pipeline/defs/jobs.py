"""`ingest_all` and one reconcile job per source: every partition of every source, in one run.

The sources have different partitions definitions (folders, wiki categories, languages,
entity type × language), and a Dagster asset job has exactly one, so no asset job can select
them all. `ingest_all` is therefore an unpartitioned op job with one op per source; each op
registers the partitions its source's configuration wants, then runs the source's own
partitioned `<source>_ingest_job` for each of them (and for every partition ingested before,
e.g. a folder added in the UI) on the same Dagster instance. Every partition run is a
normal run of the asset job — its materializations, checks and metadata show in the UI,
tagged `rag/reconcile=<the ingest_all run>` — and `ingest_all` fails, after trying them all,
if any of them failed.

On the embedded defaults every source reads its bundled demo data, so in CI:

    dagster job execute -m rag_pipeline.definitions -j ingest_all
    dg launch --job ingest_all

The ops are independent: with `RAG_EXECUTOR=multiprocess` or `celery` the sources run in
parallel (one process or Celery worker each).
"""

import time
from typing import Any

import dagster as dg

from rag_pipeline.orchestration.executors import job_executor
from rag_pipeline.orchestration.source_registry import (
    SOURCES,
    ingest_job_name,
    reconcile_job_name,
    resource_key,
)
from rag_pipeline.settings import load_settings

INGEST_ALL = "ingest_all"
RECONCILE_TAG = "rag/reconcile"


class ReconcileConfig(dg.Config):
    """Run configuration of a source's reconcile op."""

    force: bool = False
    """Recompute every stage of every partition (vectors still come from the cache)."""


def partitions_to_run(
    source: str,
    partitions_def: dg.PartitionsDefinition | None,
    wanted: list[str],
    instance: dg.DagsterInstance,
) -> list[str]:
    """The wanted partitions (registered where dynamic), then every other one ever ingested.

    A partition that was ingested before but is no longer configured (a folder added in the
    UI, a category dropped from the settings) still holds documents: reconciling it keeps
    them current, or removes them when its source is gone.
    """
    if partitions_def is None:
        return []
    register(partitions_def, wanted, instance)
    ingested = instance.get_materialized_partitions(dg.AssetKey(f"{source}_raw"))
    return list(dict.fromkeys([*wanted, *sorted(ingested)]))


def register(
    partitions_def: dg.PartitionsDefinition, keys: list[str], instance: dg.DagsterInstance
) -> None:
    """Add the dynamic parts of `keys` (a folder, a language of `window|en_US`) to the instance."""
    dynamic: dict[str, set[str]] = {}
    if isinstance(partitions_def, dg.DynamicPartitionsDefinition) and partitions_def.name:
        dynamic[partitions_def.name] = set(keys)
    elif isinstance(partitions_def, dg.MultiPartitionsDefinition):
        for key in keys:
            parsed = partitions_def.get_partition_key_from_str(key)
            for dimension in partitions_def.partitions_defs:
                if (
                    isinstance(dimension.partitions_def, dg.DynamicPartitionsDefinition)
                    and dimension.partitions_def.name
                ):
                    dynamic.setdefault(dimension.partitions_def.name, set()).add(
                        parsed.keys_by_dimension[dimension.name]
                    )
    for name, wanted in dynamic.items():
        new = sorted(key for key in wanted if not instance.has_dynamic_partition(name, key))
        if new:
            instance.add_dynamic_partitions(name, new)


def child_run_config(
    job: dg.JobDefinition, source: str, resource: dg.ConfigurableResource, force: bool
) -> dict[str, Any]:
    """Run config of a partition run: the source's configuration as this run has it.

    So what the launchpad (or `-c config.yaml`) sets on `ingest_all` for a source resource
    applies to the partition runs too, not only to the choice of partitions.
    """
    fields = {name: getattr(resource, name) for name in type(resource).model_fields}
    config: dict[str, Any] = {"resources": {resource_key(source): {"config": fields}}}
    if force:
        config["ops"] = {
            node.name: {"config": {"force": True}}
            for node in job.graph.nodes
            if node.name.startswith(f"{source}_") and not node.name.endswith("_check")
        }
    return config


def reconcile_op(source: str) -> dg.OpDefinition:
    """The op that runs every partition of one source's ingest job."""

    @dg.op(
        name=f"reconcile_{source}",
        description=f"Run {ingest_job_name(source)} for every partition of {source}.",
        required_resource_keys={resource_key(source)},
        tags={"source": source},
    )
    def reconcile(context: dg.OpExecutionContext, config: ReconcileConfig) -> None:
        # The asset jobs live in the same code location; resolved when the op runs (importing
        # the definitions while they load would be circular).
        from rag_pipeline.definitions import defs

        job = defs().resolve_job_def(ingest_job_name(source))
        resource = getattr(context.resources, resource_key(source))
        wanted = list(resource.partition_keys())
        keys = partitions_to_run(source, job.partitions_def, wanted, context.instance)
        rows = ["| partition | status | run | seconds |", "|---|---|---|---|"]
        failed: list[str] = []
        for key in keys:
            started = time.perf_counter()
            result = job.execute_in_process(
                instance=context.instance,
                partition_key=key,
                run_config=child_run_config(job, source, resource, config.force),
                tags={RECONCILE_TAG: context.run.run_id},
                raise_on_error=False,
            )
            status = "success" if result.success else "FAILED"
            if not result.success:
                failed.append(key)
            rows.append(
                f"| `{key}` | {status} | {result.run_id[:8]} "
                f"| {time.perf_counter() - started:.1f} |"
            )
            context.log.info(f"{source}/{key}: {status} (run {result.run_id})")
        context.add_output_metadata(
            {
                "partitions": len(keys),
                "partitions_failed": len(failed),
                "runs": dg.MetadataValue.md("\n".join(rows)),
            }
        )
        if failed:
            raise dg.Failure(
                f"{source}: {len(failed)} of {len(keys)} partitions failed: {', '.join(failed)}",
                metadata={"failed": ", ".join(failed)},
            )

    return reconcile


@dg.definitions
def jobs() -> dg.Definitions:
    """`ingest_all` and `<source>_reconcile_job` for every source."""
    settings = load_settings()
    executor = job_executor(settings)
    run_tags = {"dagster/max_runtime": str(settings.run_timeout_seconds)}
    ops = {source: reconcile_op(source) for source in SOURCES}

    @dg.job(
        name=INGEST_ALL,
        description="Every partition of every source, each through its own ingest job.",
        executor_def=executor,
        run_tags=run_tags,
    )
    def ingest_all() -> None:
        for op in ops.values():
            op()

    reconcile_jobs = [
        dg.GraphDefinition(
            name=f"{source}_reconcile", node_defs=[op], description=op.description
        ).to_job(name=reconcile_job_name(source), executor_def=executor, run_tags=run_tags)
        for source, op in ops.items()
    ]
    return dg.Definitions(jobs=[ingest_all, *reconcile_jobs])
