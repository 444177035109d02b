"""`rag init`, `rag backup`, `rag restore` and `rag stop`: the vector database itself."""

from pathlib import Path
from typing import Any

import click

from rag_pipeline.cli.common import cli_settings, errors_as_messages, location, psycopg_connect
from rag_pipeline.settings import Settings


def register(main: click.Group) -> None:
    """Add the commands of this module to `rag`."""
    main.add_command(init)
    main.add_command(backup)
    main.add_command(restore)
    main.add_command(stop)


@click.command()
def init() -> None:
    """Create or upgrade the vector database schema and check the embedding model."""
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.migrations import ensure_model, ensure_second_model, schema_version
    from rag_pipeline.store.runtime import load_embedder, load_second_embedder, ready_conninfo

    settings = cli_settings()
    with errors_as_messages():
        conninfo = ready_conninfo(settings)
        embedder = load_embedder(settings)
        second = load_second_embedder(settings)
        with connect(conninfo) as conn:
            ensure_model(conn, embedder.model_id, embedder.dimension, force=False)
            if second is not None:
                ensure_second_model(conn, second.model_id, second.dimension)
            version = schema_version(conn)
    click.echo(f"database: {location(settings)} (schema version {version})")
    click.echo(
        f"model:    {embedder.model_id} ({embedder.dimension} dimensions, "
        f"max {embedder.max_tokens} tokens)"
    )
    if second is not None:
        click.echo(f"second:   {second.model_id} ({second.dimension} dimensions)")


@click.command()
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
    from rag_pipeline.store import backup as backups
    from rag_pipeline.store.runtime import ready_conninfo

    settings = cli_settings()
    with errors_as_messages():
        conninfo = ready_conninfo(settings)
        backups.dump(conninfo, path, "custom" if fmt == "custom" else "plain")
        click.echo(f"wrote {path} ({path.stat().st_size:,} bytes, {fmt} format)")
        if not no_verify:
            _verify_backup(settings, conninfo, path)


@click.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
def restore(path: Path, yes: bool) -> None:
    """Replace the vector database's contents with a dump made by `rag backup`.

    All or nothing: the dump is restored into a new database and checked there (schema
    version, every constraint and index, row counts, a search); only then are the two
    databases swapped. A damaged dump, or a restore killed half-way, leaves the data as it was.
    """
    from rag_pipeline.store import backup as backups
    from rag_pipeline.store.runtime import ready_conninfo

    settings = cli_settings()
    if not yes:
        click.confirm(f"Replace everything in {location(settings)} with {path}?", abort=True)
    with errors_as_messages():
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


@click.command()
def stop() -> None:
    """Stop the embedded PostgreSQL server (it starts again with the next command)."""
    from rag_pipeline.store.server import stop_embedded_server

    settings = cli_settings()
    if not settings.uses_embedded_database:
        raise click.ClickException("an external database is configured; nothing to stop")
    stopped = stop_embedded_server(settings)
    click.echo(
        "stopped the embedded PostgreSQL" if stopped else "the embedded PostgreSQL was not running"
    )
