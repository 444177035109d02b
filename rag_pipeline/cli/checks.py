"""`rag check`: a source's checks alone on one partition, as a run on the instance.

Dagster 1.13 cannot execute a partitioned asset's checks alone on a partition from the UI (the
check's *Execute* is disabled there; *Execute all* judges every partition). This is the same
run the UI would launch: the source's job, with no asset and only the checks selected, tagged
with the partition, on the instance `dagster` uses, so it shows in the UI with its results.
"""

from typing import Any

import click

from rag_pipeline.cli.common import cli_settings, errors_as_messages
from rag_pipeline.orchestration.source_registry import SOURCE_NAMES, SourceSpec, source_spec


def register(main: click.Group) -> None:
    """Add `check` to `rag`."""
    main.add_command(check)


@click.command()
@click.option("--source", type=click.Choice(SOURCE_NAMES), required=True)
@click.option("--partition", "partition_key", required=True, help="The partition to judge.")
@click.option(
    "--name",
    "names",
    multiple=True,
    help="A check to run (repeatable; default: every check of the source).",
)
def check(source: str, partition_key: str, names: tuple[str, ...]) -> None:
    """Run a source's checks alone on one partition; one line per result, exit 1 if one failed."""
    settings = cli_settings()
    spec = source_spec(source)
    with errors_as_messages():
        import dagster as dg
        from dagster._core.definitions.reconstruct import ReconstructableRepository

        from rag_pipeline.cli.run_progress import CODE_LOCATION_ATTRIBUTE, CODE_LOCATION_MODULE
        from rag_pipeline.definitions import defs
        from rag_pipeline.orchestration.instance import dagster_instance
        from rag_pipeline.orchestration.source_registry import RAW

        keys = _check_keys(defs(), spec, names)
        instance = dagster_instance(settings)
        if partition_key not in instance.get_materialized_partitions(spec.asset_key(RAW)):
            raise click.ClickException(
                f"{source} has no partition {partition_key!r} ingested (`rag status` lists them)"
            )
        job = (
            ReconstructableRepository.for_module(CODE_LOCATION_MODULE, CODE_LOCATION_ATTRIBUTE)
            .get_reconstructable_job(spec.ingest_job)
            .get_subset(asset_selection=set(), asset_check_selection=keys)
        )
        with dg.execute_job(
            job,
            instance=instance,
            tags={"dagster/partition": partition_key},
            run_config={"loggers": {"console": {"config": {"log_level": "ERROR"}}}},
        ) as result:
            evaluations = result.get_asset_check_evaluations()
            success = result.success
    failed = 0
    for evaluation in sorted(evaluations, key=lambda e: e.check_name):
        verdict = "PASS" if evaluation.passed else evaluation.severity.value
        failed += not evaluation.passed
        click.echo(f"{verdict:<5} {evaluation.check_name}: {evaluation.description or ''}")
    judged = {e.check_name for e in evaluations}
    for key in sorted(keys, key=lambda k: k.name):
        if key.name not in judged:
            click.echo(f"SKIP  {key.name}: nothing to judge in {partition_key}")
    if not success:
        raise click.ClickException("the check run failed (see the Dagster UI)")
    if failed:
        raise click.ClickException(f"{failed} of {len(evaluations)} checks failed")


def _check_keys(definitions: Any, spec: SourceSpec, names: tuple[str, ...]) -> set[Any]:
    from rag_pipeline.orchestration.source_registry import STAGES

    assets = {spec.asset_key(stage) for stage in STAGES}
    keys = {k for k in definitions.resolve_asset_graph().asset_check_keys if k.asset_key in assets}
    unknown = set(names) - {key.name for key in keys}
    if unknown:
        choices = ", ".join(sorted({key.name for key in keys}))
        raise click.UsageError(f"no check {', '.join(sorted(unknown))} on {spec.name}: {choices}")
    return {key for key in keys if not names or key.name in names}
