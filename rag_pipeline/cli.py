"""The `rag` command: a thin layer over the same code the Dagster assets run."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from rag_pipeline.settings import ConfigError, Settings, load_settings


def _settings() -> Settings:
    try:
        return load_settings()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


@contextmanager
def _errors_as_messages() -> Iterator[None]:
    """Known failures print one line naming the cause and the fix, and exit 1.

    Configuration, model, backup, embedded-server problems, a database that is unreachable
    or went away, a full disk, a read-only RAG_HOME (see `cli_errors`). Inside, files are
    created private (umask 077): RAG_HOME, Dagster's run storage with its document previews,
    model links and dumps are readable by their owner only.
    """
    from rag_pipeline.cli_errors import error_message
    from rag_pipeline.sources.files import FolderError

    previous_umask = os.umask(0o077)
    try:
        yield
    except click.ClickException:
        raise
    except FolderError as exc:
        raise click.ClickException(str(exc)) from exc
    except Exception as exc:
        home = os.environ.get("RAG_HOME") or str(Path.home() / ".rag_pipeline")
        message = error_message(exc, home=home)
        if message is None:
            raise
        raise click.ClickException(message) from exc
    finally:
        os.umask(previous_umask)


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

    All or nothing: the dump is restored into a new database and checked there (schema
    version, every constraint and index, row counts, a search); only then are the two
    databases swapped. A damaged dump, or a restore killed half-way, leaves the data as it was.
    """
    from rag_pipeline.runtime import ready_conninfo
    from rag_pipeline.store import backup as backups

    settings = _settings()
    if not yes:
        click.confirm(f"Replace everything in {_location(settings)} with {path}?", abort=True)
    with _errors_as_messages():
        conninfo = ready_conninfo(settings)
        report = backups.replace_database(conninfo, path, _smoke_search(settings))
    counts = report.counts
    click.echo(
        f"restored {path}: {counts['rag.documents']} documents, {counts['rag.chunks']} chunks"
        f" (schema version {report.schema_version}, checked before it replaced the old data)"
    )


def _smoke_search(settings: Settings) -> Any:
    """A search by the first document's title on a database: the ids of its hits."""
    from rag_pipeline.search import Searcher

    def smoke(target: str) -> list[str]:
        with psycopg_connect(target) as conn:
            row = conn.execute("SELECT title FROM rag.documents ORDER BY id LIMIT 1").fetchone()
        if row is None:
            return []
        hits = Searcher(settings, conninfo=target).search(row[0], top_k=5)
        return [hit.chunk_id for hit in hits]

    return smoke


def _verify_backup(settings: Settings, conninfo: str, path: Path) -> None:
    from rag_pipeline.store import backup as backups

    report = backups.verify(conninfo, path, _smoke_search(settings))
    if not report.ok:
        raise click.ClickException(
            f"the dump does not restore to the same data: {report.source_counts} vs "
            f"{report.restored_counts}; search {report.source_search} vs {report.restored_search}"
        )
    click.echo(
        f"verified: restored into a scratch database, {report.restored_counts['rag.chunks']} "
        f"chunks, the same {len(report.source_search)} search hits"
    )


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


__import__("rag_pipeline.cli_ingest").cli_ingest.register(main)  # ingest, status, clear, folders
__import__("rag_pipeline.cli_ask").cli_ask.register(main)  # `rag ask`, `rag mcp`
__import__("rag_pipeline.cli_search").cli_search.register(main)  # `rag search`, `rag eval`
__import__("rag_pipeline.cli_ops").cli_ops.register(main)  # `rag validate`, `rag dev`

if __name__ == "__main__":
    main()
