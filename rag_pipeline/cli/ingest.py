"""`rag ingest`, `rag status` and `rag clear`: running and inspecting the jobs.

`rag ingest` runs a source's real Dagster asset job, one run per partition, on the instance
`dagster` also uses (see `rag_pipeline.orchestration.instance`), so its runs show up in the UI.
Each run is executed by Dagster's `execute_job` from the code location's module, like
`dagster job execute`: with the code location's executor (in process by default, so the
progress bar follows its steps; `RAG_EXECUTOR=celery` sends them to the workers) and its run
tags. `--source all` is the CI recipe: every partition of every source (the configured ones and
every one ingested before), and exit status 1 if any run failed. Without `--force` it first
reads each partition's cheap listing and runs only the partitions where something changed;
each other one gets an observation of its source system (the listing's data version and
counts) and no run. Then the `ingest_errors` report is recorded with the failures as the
runs left them.
"""

import signal
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from rag_pipeline.cli.common import cli_settings, errors_as_messages, location
from rag_pipeline.cli.run_guard import Terminated, fail_abandoned_runs, sigterm_raises
from rag_pipeline.cli.run_progress import RunSummary, execute_with_progress, short
from rag_pipeline.orchestration.source_registry import SOURCE_NAMES, SourceSpec, source_spec
from rag_pipeline.settings import Settings

SOURCES = SOURCE_NAMES
_ALL = "all"


class AlreadyRunning(click.ClickException):
    """Another ingest of the same partition holds its lock."""


def register(main: click.Group) -> None:
    """Add the commands of this module to `rag`."""
    main.add_command(ingest)
    main.add_command(status)
    main.add_command(clear)


@click.command()
@click.option(
    "--source",
    type=click.Choice([*SOURCES, _ALL]),
    default="files",
    show_default=True,
    help="Which source to ingest (`all`: every source, each with its configured partitions).",
)
@click.option(
    "--path",
    "paths",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help=(
        "Folder to ingest (files source; repeatable), under the name it is registered with, "
        "else one derived from its last component (said once). Default: the bundled demo corpus."
    ),
)
@click.option(
    "--xml",
    "xml_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A MediaWiki XML export to import (wiki source).",
)
@click.option("--force", is_flag=True, help="Recompute every stage, even for unchanged documents.")
@click.option("--strict", is_flag=True, help="Exit with status 1 if any document failed.")
def ingest(
    source: str, paths: tuple[Path, ...], xml_file: Path | None, force: bool, strict: bool
) -> None:
    """Run a source's Dagster asset job, a run per partition, and print what changed."""

    settings = cli_settings()
    if paths and source != "files":
        raise click.UsageError("--path is for the files source")
    if xml_file is not None and source != "wiki":
        raise click.UsageError("--xml is for the wiki source")
    any_failed = False
    failed_runs: list[str] = []
    with errors_as_messages(), _stopped_by_signal():
        from rag_pipeline.definitions import defs
        from rag_pipeline.orchestration.instance import dagster_instance

        definitions = defs()
        instance = dagster_instance(settings)
        abandoned = fail_abandoned_runs(instance)
        if abandoned:
            click.secho(
                f"marked failed {len(abandoned)} run(s) a killed `rag ingest` left running: "
                + ", ".join(abandoned),
                fg="yellow",
                err=True,
            )
        for spec in _chosen(source):
            overrides = _resource_overrides(spec.name, xml_file)
            wanted = _partition_keys(definitions, spec, paths, overrides)
            if source == _ALL:
                from rag_pipeline.orchestration.reconcile import reconcile_partitions

                wanted = reconcile_partitions(spec, wanted, instance)
                if not force:
                    wanted = _changed_partitions(settings, definitions, instance, spec, wanted)
            for key in wanted:
                summary = _run_job(settings, definitions, instance, spec, key, force, overrides)
                _print_summary(summary)
                any_failed = any_failed or bool(summary.failures)
                if not summary.success:
                    failed_runs.append(f"{spec.name}/{short(key)} ({summary.error or 'no cause'})")
                    click.secho(f"the run for {spec.name}/{key} failed: {summary.error}", err=True)
            # Unchanged partitions launch no run; a glossary never built is built all the same.
            if spec.glossary and (wanted or _no_glossary(settings)):
                failed_runs += _run_glossary(settings, definitions, instance, spec)
        _record_ingest_errors(settings, instance)
    if failed_runs:
        from rag_pipeline.cli.errors import full_disk

        runs = "1 run" if len(failed_runs) == 1 else f"{len(failed_runs)} runs"
        # A full disk fails a run in many ways (the server stops, a file cannot grow): say it.
        full = full_disk(str(settings.home))
        if full is not None:
            raise click.ClickException(f"{runs} failed: {full}")
        raise click.ClickException(f"{runs} failed: {'; '.join(failed_runs)}")
    if strict and any_failed:
        sys.exit(1)


@contextmanager
def _stopped_by_signal() -> Iterator[None]:
    """SIGTERM and SIGINT end the command with one line (the run is marked canceled)."""
    try:
        with sigterm_raises():
            yield
    except Terminated:
        click.echo("Error: stopped by SIGTERM; the run in progress is marked canceled", err=True)
        raise SystemExit(128 + signal.SIGTERM) from None
    except KeyboardInterrupt:
        click.echo("Error: stopped by Ctrl-C; the run in progress is marked canceled", err=True)
        raise SystemExit(128 + signal.SIGINT) from None


def _chosen(source: str) -> tuple[SourceSpec, ...]:
    from rag_pipeline.orchestration.source_registry import SOURCES as SPECS

    return SPECS if source == _ALL else (source_spec(source),)


def _changed_partitions(
    settings: Settings, definitions: Any, instance: Any, spec: SourceSpec, keys: list[str]
) -> list[str]:
    """The partitions whose run would change something; the others are observed and said."""
    from rag_pipeline.orchestration.listing import (
        failing_partitions,
        list_partition,
        listing_observation,
        why_run,
    )
    from rag_pipeline.orchestration.raw_asset import RAW_FINGERPRINT
    from rag_pipeline.orchestration.reconcile import register
    from rag_pipeline.orchestration.source_registry import STAGES
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.runtime import ready_conninfo

    graph = definitions.resolve_asset_graph()
    code_versions = {stage: graph.get(spec.asset_key(stage)).code_version for stage in STAGES}
    partitions_def = definitions.resolve_job_def(spec.ingest_job).partitions_def
    try:
        source = _source_resource(definitions, spec, {}).build()
    except Exception:  # each run reports it, as before
        return keys
    changed: list[str] = []
    try:
        with connect(ready_conninfo(settings)) as conn:
            if _second_vectors_missing(conn, settings, spec.name):
                return keys
            failing = failing_partitions(conn, spec)
            for key in keys:
                try:
                    listing = list_partition(source, key)
                except Exception:  # the partition's run retries and reports it, as before
                    changed.append(key)
                    continue
                reason = why_run(
                    instance, code_versions, conn, spec, key, listing, RAW_FINGERPRINT, failing
                )
                if reason is not None:
                    changed.append(key)
                    continue
                register(partitions_def, [key], instance)
                instance.report_runless_asset_event(
                    listing_observation(spec, key, listing, skipped=True)
                )
                click.echo(
                    f"{spec.name}/{short(key)}: unchanged ({len(listing.versions)} documents "
                    "listed), no run"
                )
    finally:
        source.close()
    return changed


def _second_vectors_missing(conn: Any, settings: Settings, source_type: str) -> bool:
    """Whether the source's chunks lack the configured multilingual model's vectors
    (RAG_MULTILINGUAL_MODEL turned on or changed, or an index from before it): every partition
    then runs, and the embeddings step adds them, reusing the first model's cached vectors."""
    from rag_pipeline.store.migrations import stored_second_model

    configured = settings.second_vector_model
    if configured is None:
        return False
    stored = stored_second_model(conn)
    if stored is None or stored[0] != configured:
        return True
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM rag.chunks WHERE source_type = %s AND embedding_ml IS NULL)",
        (source_type,),
    ).fetchone()
    return bool(row and row[0])


def _record_ingest_errors(settings: Settings, instance: Any) -> None:
    """The `ingest_errors` report, as the runs left the store."""
    import dagster as dg

    from rag_pipeline.defs.errors import INGEST_ERRORS, ingest_errors_metadata
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.runtime import ready_conninfo

    with connect(ready_conninfo(settings)) as conn:
        metadata = ingest_errors_metadata(conn)
    instance.report_runless_asset_event(dg.AssetMaterialization(INGEST_ERRORS, metadata=metadata))


def _resource_overrides(source: str, xml_file: Path | None) -> dict[str, Any]:
    if source == "wiki" and xml_file is not None:
        return {"xml_file": str(xml_file.resolve())}
    return {}


def _source_resource(definitions: Any, spec: SourceSpec, overrides: dict[str, Any]) -> Any:
    resources: dict[str, Any] = dict(definitions.resources or {})
    resource = resources.get(spec.resource_key)
    if resource is None:
        raise click.ClickException(f"the {spec.name} source is not available in this installation")
    return resource.model_copy(update=overrides) if overrides else resource


def _partition_keys(
    definitions: Any, spec: SourceSpec, paths: tuple[Path, ...], overrides: dict[str, Any]
) -> list[str]:
    if spec.name == "files":
        from rag_pipeline.sources.files import DEMO_PARTITION

        if paths:
            return [_folder_partition(path) for path in paths]
        if not overrides:
            return [DEMO_PARTITION]
    return list(_source_resource(definitions, spec, overrides).partition_keys())


def _folder_partition(path: Path) -> str:
    """The name of a folder given with --path, registering it (and saying so) when new."""
    from rag_pipeline.operations.folders import register_folder

    registration = register_folder(cli_settings(), path)
    if registration.new:
        click.echo(
            f"registered {registration.path} as folder {registration.name!r} "
            f"(source ids: {registration.name}/<relative path>)"
        )
    return registration.name


def _run_config(
    job: Any, force: bool, spec: SourceSpec, overrides: dict[str, Any]
) -> dict[str, Any]:
    config: dict[str, Any] = {
        # The progress bar and summary say what matters, a failed run its cause in one line;
        # the tracebacks stay in the run's event log (the UI), not on the terminal.
        "loggers": {"console": {"config": {"log_level": "CRITICAL"}}},
    }
    if force:
        # Every stage reads it (IngestConfig); the checks take no config.
        from rag_pipeline.orchestration.source_registry import STAGES

        # An asset keyed `[source, stage]` runs as the op `source__stage`.
        stages = {spec.asset_key(stage).to_python_identifier() for stage in STAGES}
        config["ops"] = {
            node.name: {"config": {"force": True}}
            for node in job.graph.nodes
            if node.name in stages
        }
    if overrides:
        config["resources"] = {spec.resource_key: {"config": overrides}}
    return config


def _run_job(
    settings: Settings,
    definitions: Any,
    instance: Any,
    spec: SourceSpec,
    partition_key: str,
    force: bool,
    overrides: dict[str, Any],
) -> RunSummary:
    from rag_pipeline.orchestration.reconcile import register
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.locks import advisory_lock
    from rag_pipeline.store.runtime import ready_conninfo

    source = spec.name
    job = definitions.resolve_job_def(spec.ingest_job)
    invocation = str(uuid.uuid4())
    summary = RunSummary(source, partition_key, success=False)
    # The partition's run lock first: a second ingest of it leaves before touching anything.
    with (
        connect(ready_conninfo(settings), autocommit=True) as lock_conn,
        advisory_lock(lock_conn, "run", source, partition_key, wait=False) as acquired,
    ):
        if not acquired:
            raise AlreadyRunning(
                f"{source}/{short(partition_key)} is already being ingested by another process; "
                "its result will be in `rag status` when it ends"
            )
        # Dynamic partitions (one per folder, category, language; or a dimension of a multi-
        # partition key) must be known to the instance before a run can use them.
        register(job.partitions_def, [partition_key], instance)
        execute_with_progress(
            instance,
            spec.ingest_job,
            invocation,
            partition_key,
            _run_config(job, force, spec, overrides),
            summary,
        )
        run_id = summary.run_id
        with connect(ready_conninfo(settings)) as conn:
            from rag_pipeline.store.reports import run_stats
            from rag_pipeline.store.runs import run_errors

            summary.stats = run_stats(conn, run_id)
            summary.failures = run_errors(conn, run_id)
    return summary


def _no_glossary(settings: Settings) -> bool:
    """Whether no language's glossary was built yet (an index from before the glossary)."""
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.glossary import glossary_states
    from rag_pipeline.store.runtime import ready_conninfo

    with connect(ready_conninfo(settings)) as conn:
        return not glossary_states(conn)


def _run_glossary(
    settings: Settings, definitions: Any, instance: Any, spec: SourceSpec
) -> list[str]:
    """Build the source's glossary for each of its languages, after its dictionary; the runs
    that failed."""
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.glossary import glossary_states
    from rag_pipeline.store.runtime import ready_conninfo

    job = definitions.resolve_job_def(spec.glossary_job)
    failed: list[str] = []
    for language in job.partitions_def.get_partition_keys(dynamic_partitions_store=instance):
        summary = RunSummary(f"{spec.name} glossary", language, success=False)
        config = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
        execute_with_progress(
            instance, spec.glossary_job, str(uuid.uuid4()), language, config, summary
        )
        if not summary.success:
            failed.append(f"{spec.name} glossary/{language}")
            click.secho(f"the glossary run for {language} failed: {summary.error}", err=True)
            continue
        with connect(ready_conninfo(settings)) as conn:
            state = {s.language: s for s in glossary_states(conn)}.get(language)
        if state is not None:
            click.echo(
                f"{spec.name} glossary/{language}: {state.names} name pairs, {state.words} word "
                f"pairs; {summary.seconds:.1f} s"
            )
    return failed


def _print_summary(summary: RunSummary) -> None:
    stats = summary.stats
    failed = len({f[1] for f in summary.failures})
    if stats:
        click.echo(
            f"{summary.source}/{short(summary.partition_key)}: {stats['documents_new']} new, "
            f"{stats['documents_changed']} changed, {stats['documents_unchanged']} unchanged, "
            f"{stats['documents_deleted']} deleted, {failed} failed documents; "
            f"{stats['chunks_embedded']} chunks embedded, {stats['chunks_reused']} reused "
            f"from the cache; {summary.seconds:.1f} s"
        )
    for _, source_id, stage, reason in summary.failures:
        click.secho(f"  failed: {source_id} ({stage}): {reason}", fg="yellow", err=True)


@click.command()
def status() -> None:
    """The index per source and language, each source's freshness, last runs and failures."""
    from datetime import UTC, datetime

    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.migrations import schema_version, stored_model, stored_second_model
    from rag_pipeline.store.reports import (
        current_failures,
        index_counts,
        index_size,
        last_runs,
        source_freshness,
    )
    from rag_pipeline.store.runtime import ready_conninfo

    settings = cli_settings()
    with errors_as_messages(), connect(ready_conninfo(settings)) as conn:
        version = schema_version(conn)
        model = stored_model(conn)
        second = stored_second_model(conn)
        counts = index_counts(conn)
        runs = last_runs(conn)
        freshness = source_freshness(conn)
        failures = current_failures(conn)
        size = index_size(conn)
    now = datetime.now(UTC)
    click.echo(f"database: {location(settings)} (schema version {version})")
    click.echo(f"model:    {model[0]} ({model[1]} dimensions)" if model else "model:    none yet")
    if second:
        click.echo(f"second:   {second[0]} ({second[1]} dimensions, questions in other languages)")
    if not counts:
        click.echo("index:    empty — run `rag ingest`")
    else:
        click.echo(
            f"index:    {size.documents} documents, {size.chunks} chunks, "
            f"{_megabytes(size.index_bytes)} (database {_megabytes(size.database_bytes)})"
        )
    for source_type, language, documents, chunks in counts:
        click.echo(f"  {source_type:<12} {language:<6} {documents:>7} documents {chunks:>8} chunks")
    for item in freshness:
        synced = (
            f"last sync {item.last_sync:%Y-%m-%d %H:%M:%S} ({_age(now - item.last_sync)} ago)"
            if item.last_sync
            else "never synced"
        )
        click.echo(
            f"source:   {item.source_type:<12} {synced}, {_count(item.partitions, 'partition')}, "
            f"{item.failed_documents} failed, {item.documents_behind} behind"
        )
    for run in runs:
        click.echo(
            f"last run: {run.source_type}/{short(run.partition_key)} at "
            f"{run.finished_at:%Y-%m-%d %H:%M:%S}, {run.failed_documents} failed documents"
        )
    if failures:
        click.echo(f"failed documents ({len(failures)}):")
    for failure in failures:
        click.echo(
            f"  {failure.source_type}/{short(failure.partition_key)}: {failure.source_id} "
            f"({failure.stage}): {failure.reason[:200]}"
        )


def _count(number: int, noun: str) -> str:
    """`1 partition`, `3 partitions`."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _megabytes(size: int) -> str:
    return f"{size / 1_048_576:.1f} MB"


def _age(delta: Any) -> str:
    from rag_pipeline.defs.errors import age

    return age(delta)


@click.command()
@click.option("--source", type=click.Choice(SOURCES), required=True)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
def clear(source: str, yes: bool) -> None:
    """Delete every document, chunk and stage row of a source."""
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.reports import clear_source
    from rag_pipeline.store.runtime import ready_conninfo

    settings = cli_settings()
    if not yes:
        click.confirm(f"Delete everything of source {source!r} from the index?", abort=True)
    with errors_as_messages(), connect(ready_conninfo(settings)) as conn:
        documents = clear_source(conn, source)
    click.echo(f"deleted {documents} documents of {source}")
