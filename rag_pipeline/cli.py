"""The `rag` command: a thin layer over the same code the Dagster assets run."""

import json
import os
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from rag_pipeline.settings import ConfigError, Settings, load_settings

SOURCES = ("files",)
_JOBS = {"files": "files_ingest_job"}
_PARTITIONS = {"files": "files_folders"}


def _settings() -> Settings:
    try:
        return load_settings()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


@contextmanager
def _errors_as_messages() -> Iterator[None]:
    """Known failures (configuration, model, database) print one line, not a traceback."""
    from rag_pipeline.core.embedding import EmbeddingModelError
    from rag_pipeline.core.sources.files import FolderError
    from rag_pipeline.store.backup import BackupError
    from rag_pipeline.store.migrations import ModelMismatchError

    try:
        yield
    except (ConfigError, EmbeddingModelError, ModelMismatchError, FolderError, BackupError) as exc:
        raise click.ClickException(str(exc)) from exc


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rag_pipeline")
def main() -> None:
    """rag_pipeline: a fresh hybrid search index of iDempiere knowledge in PostgreSQL."""


@main.command()
def init() -> None:
    """Create or upgrade the vector database schema and check the embedding model."""
    from rag_pipeline.runtime import load_embedder, ready_conninfo
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.migrations import ensure_model, schema_version

    settings = _settings()
    with _errors_as_messages():
        conninfo = ready_conninfo(settings)
        embedder = load_embedder(settings)
        with connect(conninfo) as conn:
            ensure_model(conn, embedder.model_id, embedder.dimension, force=False)
            version = schema_version(conn)
    click.echo(f"database: {_location(settings)} (schema version {version})")
    click.echo(
        f"model:    {embedder.model_id} ({embedder.dimension} dimensions, "
        f"max {embedder.max_tokens} tokens)"
    )


@main.command()
@click.option("--source", type=click.Choice(SOURCES), default="files", show_default=True)
@click.option(
    "--path",
    "paths",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Folder to ingest (files source; repeatable). Default: the bundled demo corpus.",
)
@click.option("--force", is_flag=True, help="Recompute every stage, even for unchanged documents.")
@click.option("--strict", is_flag=True, help="Exit with status 1 if any document failed.")
def ingest(source: str, paths: tuple[Path, ...], force: bool, strict: bool) -> None:
    """Run the source's Dagster asset job in process and print what changed."""
    from rag_pipeline.core.sources.files import DEMO_PARTITION, partition_key_for

    settings = _settings()
    with _errors_as_messages():
        keys = [partition_key_for(p) for p in paths] or [DEMO_PARTITION]
    any_failed = False
    for key in keys:
        summary = _run_job(settings, source, key, force=force)
        any_failed = any_failed or bool(summary["failures"]) or not summary["success"]
        _print_summary(source, key, summary)
        if not summary["success"]:
            raise click.ClickException(f"the run for {source}/{key} failed: {summary['error']}")
    if strict and any_failed:
        sys.exit(1)


def dagster_home(settings: Settings) -> Path:
    """DAGSTER_HOME if set, else a folder under RAG_HOME (so `rag dev` shows CLI runs)."""
    configured = os.environ.get("DAGSTER_HOME")
    home = Path(configured) if configured else settings.home / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not configured and not config.exists():
        config.write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    return home


def _run_job(settings: Settings, source: str, partition_key: str, *, force: bool) -> dict[str, Any]:

    from rag_pipeline.chain import FORCE_TAG
    from rag_pipeline.definitions import defs

    instance = _instance(settings)
    partitions = _PARTITIONS[source]
    if not instance.has_dynamic_partition(partitions, partition_key):
        instance.add_dynamic_partitions(partitions, [partition_key])
    job = defs().resolve_job_def(_JOBS[source])
    run_id = str(uuid.uuid4())
    outcome: dict[str, Any] = {}

    def execute() -> None:
        try:
            result = job.execute_in_process(
                # The progress bar and summary say what matters; the event log is in the UI.
                run_config={"loggers": {"console": {"config": {"log_level": "ERROR"}}}},
                instance=instance,
                partition_key=partition_key,
                run_id=run_id,
                tags={FORCE_TAG: "true"} if force else {},
                raise_on_error=False,
            )
            outcome["success"] = result.success
            failure = next((e for e in result.all_events if e.is_step_failure), None)
            outcome["error"] = failure.message if failure else ""
        except Exception as exc:  # surfaced below, after the progress bar closes
            outcome["success"] = False
            outcome["error"] = f"{type(exc).__name__}: {exc}"

    steps = len(list(job.graph.nodes))
    worker = threading.Thread(target=execute, daemon=True)
    started = time.perf_counter()
    worker.start()
    with click.progressbar(length=steps, label=f"{source}/{_short(partition_key)}") as bar:
        done = 0
        while worker.is_alive():
            worker.join(0.25)
            finished = _finished_steps(instance, run_id)
            bar.update(finished - done)
            done = finished
        bar.update(steps - done)
    outcome["seconds"] = time.perf_counter() - started
    outcome.update(_run_report(settings, run_id))
    return outcome


def _finished_steps(instance: Any, run_id: str) -> int:
    import dagster as dg

    records = instance.get_records_for_run(
        run_id, of_type={dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}
    ).records
    return len(records)


def _run_report(settings: Settings, run_id: str) -> dict[str, Any]:
    from rag_pipeline.runtime import ready_conninfo
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.runs import run_errors

    with connect(ready_conninfo(settings)) as conn:
        row = conn.execute(
            "SELECT stats FROM rag.ingest_runs WHERE run_id = %s", (run_id,)
        ).fetchone()
        failures = run_errors(conn, run_id)
    return {"stats": row[0] if row else {}, "failures": failures}


def _print_summary(source: str, partition_key: str, summary: dict[str, Any]) -> None:
    stats = summary["stats"]
    failed = len({(f[1]) for f in summary["failures"]})
    if stats:
        click.echo(
            f"{source}/{_short(partition_key)}: {stats['documents_new']} new, "
            f"{stats['documents_changed']} changed, {stats['documents_unchanged']} unchanged, "
            f"{stats['documents_deleted']} deleted, {failed} failed documents; "
            f"{stats['chunks_embedded']} chunks embedded, {stats['chunks_reused']} reused "
            f"from the cache; {summary['seconds']:.1f} s"
        )
    for _, source_id, stage, reason in summary["failures"]:
        click.secho(f"  failed: {source_id} ({stage}): {reason}", fg="yellow", err=True)


def _short(partition_key: str) -> str:
    return partition_key if len(partition_key) <= 40 else "…" + partition_key[-39:]


@main.command()
@click.argument("query")
@click.option("--top-k", "-k", default=5, show_default=True, type=click.IntRange(1, 100))
@click.option("--source", "sources", multiple=True, help="Only this source type (repeatable).")
@click.option("--lang", "languages", multiple=True, help="Only this language, e.g. en_US or en.")
@click.option("--min-score", default=-1.0, type=float, help="Drop hits scoring below this.")
@click.option(
    "--expand",
    type=click.Choice(["parent", "chunk"]),
    default="parent",
    show_default=True,
    help="Return each hit's whole parent section, or only the matching chunk.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
def search(
    query: str,
    top_k: int,
    sources: tuple[str, ...],
    languages: tuple[str, ...],
    min_score: float,
    expand: str,
    as_json: bool,
) -> None:
    """Search the index and print the best sections."""
    from rag_pipeline.search import Searcher

    with _errors_as_messages():
        hits = Searcher(_settings()).search(
            query,
            top_k=top_k,
            source_types=sources or None,
            languages=languages or None,
            min_score=min_score,
            expand="chunk" if expand == "chunk" else "parent",
        )
    if as_json:
        click.echo(json.dumps([hit.to_dict() for hit in hits], ensure_ascii=False, indent=2))
        return
    if not hits:
        click.echo("no results (is anything ingested? try `rag status`)")
    for rank, hit in enumerate(hits, 1):
        where = " › ".join(p for p in (hit.title, *hit.heading_path[1:]) if p)
        click.secho(f"{rank}. {where}", bold=True)
        click.echo(
            f"   {hit.source_type} · {hit.language} · {hit.source_id} · score {hit.score:.3f}"
        )
        snippet = " ".join(hit.text.split())
        click.echo(textwrap.indent(textwrap.fill(snippet[:400], 96), "   "))


@main.command()
def status() -> None:
    """Documents and chunks per source and language, the model and the database."""
    from rag_pipeline.runtime import ready_conninfo
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.migrations import schema_version, stored_model

    settings = _settings()
    with _errors_as_messages(), connect(ready_conninfo(settings)) as conn:
        version = schema_version(conn)
        model = stored_model(conn)
        rows = conn.execute(
            "SELECT d.source_type, d.language, count(DISTINCT d.id), count(c.id)"
            " FROM rag.documents d LEFT JOIN rag.chunks c ON c.document_id = d.id"
            " GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
        runs = conn.execute(
            "SELECT DISTINCT ON (source_type, partition_key) source_type, partition_key,"
            " finished_at, run_id FROM rag.ingest_runs"
            " ORDER BY source_type, partition_key, finished_at DESC"
        ).fetchall()
        failures = {
            run_id: conn.execute(
                "SELECT count(DISTINCT source_id) FROM rag.ingest_errors WHERE run_id = %s",
                (run_id,),
            ).fetchone()[0]  # type: ignore[index]
            for *_, run_id in runs
        }
    click.echo(f"database: {_location(settings)} (schema version {version})")
    click.echo(f"model:    {model[0]} ({model[1]} dimensions)" if model else "model:    none yet")
    if not rows:
        click.echo("index:    empty — run `rag ingest`")
    for source_type, language, documents, chunks in rows:
        click.echo(f"  {source_type:<12} {language:<6} {documents:>7} documents {chunks:>8} chunks")
    for source_type, partition_key, finished, run_id in runs:
        click.echo(
            f"last run: {source_type}/{_short(partition_key)} at {finished:%Y-%m-%d %H:%M:%S}, "
            f"{failures[run_id]} failed documents"
        )


@main.command()
@click.option("--source", type=click.Choice(SOURCES), required=True)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
def clear(source: str, yes: bool) -> None:
    """Delete every document, chunk and stage row of a source."""
    from rag_pipeline.runtime import ready_conninfo
    from rag_pipeline.store.connection import connect

    settings = _settings()
    if not yes:
        click.confirm(f"Delete everything of source {source!r} from the index?", abort=True)
    with _errors_as_messages(), connect(ready_conninfo(settings)) as conn, conn.transaction():
        documents = conn.execute(
            "DELETE FROM rag.documents WHERE source_type = %s", (source,)
        ).rowcount
        conn.execute("DELETE FROM rag.stage_documents WHERE asset_key LIKE %s", (f"{source}\\_%",))
    click.echo(f"deleted {documents} documents of {source}")


@main.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["custom", "plain"]),
    default="custom",
    show_default=True,
    help="pg_dump's custom archive, or plain SQL.",
)
@click.option("--no-verify", is_flag=True, help="Skip the restore into a scratch database.")
def backup(path: Path, fmt: str, no_verify: bool) -> None:
    """Dump the vector database with pg_dump, then prove the dump restores.

    The proof restores the dump into a scratch database on the same server, compares the row
    counts of every table and runs the same search on both.
    """
    from rag_pipeline.runtime import ready_conninfo
    from rag_pipeline.store import backup as backups

    settings = _settings()
    with _errors_as_messages():
        conninfo = ready_conninfo(settings)
        backups.dump(conninfo, path, "custom" if fmt == "custom" else "plain")
        click.echo(f"wrote {path} ({path.stat().st_size:,} bytes, {fmt} format)")
        if not no_verify:
            _verify_backup(settings, conninfo, path)


@main.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
def restore(path: Path, yes: bool) -> None:
    """Replace the vector database's contents with a dump made by `rag backup`.

    The dump is first restored into a scratch database and checked; only a dump that restores
    cleanly replaces the current data.
    """
    from rag_pipeline.runtime import ready_conninfo
    from rag_pipeline.store import backup as backups

    settings = _settings()
    if not yes:
        click.confirm(f"Replace everything in {_location(settings)} with {path}?", abort=True)
    with _errors_as_messages():
        conninfo = ready_conninfo(settings)
        with backups.scratch_database(conninfo) as scratch:
            backups.restore(scratch, path)  # fails here, before the real data is touched
        backups.restore(conninfo, path)
        counts = backups.row_counts(conninfo)
    click.echo(
        f"restored {path}: {counts['rag.documents']} documents, {counts['rag.chunks']} chunks"
    )


def _verify_backup(settings: Settings, conninfo: str, path: Path) -> None:
    from rag_pipeline.search import Searcher
    from rag_pipeline.store import backup as backups

    def smoke(target: str) -> list[str]:
        with psycopg_connect(target) as conn:
            row = conn.execute("SELECT title FROM rag.documents ORDER BY id LIMIT 1").fetchone()
        if row is None:
            return []
        hits = Searcher(settings, conninfo=target).search(row[0], top_k=5)
        return [hit.chunk_id for hit in hits]

    report = backups.verify(conninfo, path, smoke)
    if not report.ok:
        raise click.ClickException(
            f"the dump does not restore to the same data: {report.source_counts} vs "
            f"{report.restored_counts}; search {report.source_search} vs {report.restored_search}"
        )
    click.echo(
        f"verified: restored into a scratch database, {report.restored_counts['rag.chunks']} "
        f"chunks, the same {len(report.source_search)} search hits"
    )


@main.group()
def folders() -> None:
    """Folders (partitions) of the files source known to Dagster.

    `rag ingest --path` registers its folders itself; register them here before running the
    job another way, e.g. `dagster job execute` in CI.
    """


@folders.command("add")
@click.argument("paths", nargs=-1, required=True)
def folders_add(paths: tuple[str, ...]) -> None:
    """Register folders (`demo` = the bundled corpus) as files partitions."""
    from rag_pipeline.core.sources.files import partition_key_for

    with _errors_as_messages():
        keys = [partition_key_for(p) for p in paths]
    instance = _instance(_settings())
    for key in keys:
        if not instance.has_dynamic_partition(_PARTITIONS["files"], key):
            instance.add_dynamic_partitions(_PARTITIONS["files"], [key])
        click.echo(key)


@folders.command("list")
def folders_list() -> None:
    """Print the registered folders."""
    for key in _instance(_settings()).get_dynamic_partitions(_PARTITIONS["files"]):
        click.echo(key)


@folders.command("remove")
@click.argument("keys", nargs=-1, required=True)
def folders_remove(keys: tuple[str, ...]) -> None:
    """Unregister folders (their documents stay indexed until `rag clear`)."""
    instance = _instance(_settings())
    for key in keys:
        instance.delete_dynamic_partition(_PARTITIONS["files"], key)


def _instance(settings: Settings) -> Any:
    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(dagster_home(settings))
    return dg.DagsterInstance.get()


@main.command()
def stop() -> None:
    """Stop the embedded PostgreSQL server (it starts again with the next command)."""
    from rag_pipeline.store.server import stop_embedded_server

    settings = _settings()
    if not settings.uses_embedded_database:
        raise click.ClickException("an external database is configured; nothing to stop")
    stopped = stop_embedded_server(settings)
    click.echo(
        "stopped the embedded PostgreSQL" if stopped else "the embedded PostgreSQL was not running"
    )


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("dagster_args", nargs=-1, type=click.UNPROCESSED)
def dev(dagster_args: tuple[str, ...]) -> None:
    """Start the Dagster UI on this code location (runs of `rag ingest` show up there)."""
    settings = _settings()
    os.environ["DAGSTER_HOME"] = str(dagster_home(settings))
    command = ["dagster", "dev", "-m", "rag_pipeline.definitions", *dagster_args]
    os.execvp(command[0], command)


def psycopg_connect(conninfo: str) -> Any:
    """A plain connection (no pgvector types needed)."""
    import psycopg

    return psycopg.connect(conninfo)


def _location(settings: Settings) -> str:
    from rag_pipeline.store.server import embedded_data_dir

    if settings.uses_embedded_database:
        return f"embedded PostgreSQL in {embedded_data_dir(settings)}"
    conninfo = settings.external_conninfo or ""
    # Never print a password.
    return conninfo.split("@")[-1] if "@" in conninfo else conninfo


if __name__ == "__main__":
    main()
