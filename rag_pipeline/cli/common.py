"""What every `rag` command shares: its settings, one-line errors, and where the database is."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from rag_pipeline.settings import ConfigError, Settings, load_settings


def cli_settings() -> Settings:
    """The settings, or a one-line error naming the bad one."""
    try:
        return load_settings()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


@contextmanager
def errors_as_messages() -> Iterator[None]:
    """Known failures print one line naming the cause and the fix, and exit 1.

    Configuration, model, backup, embedded-server problems, a database that is unreachable
    or went away, a full disk, a read-only RAG_HOME (see `rag_pipeline.cli.errors`). Inside,
    files are created private (umask 077): RAG_HOME, Dagster's run storage with its document
    previews, model links and dumps are readable by their owner only.
    """
    from rag_pipeline.cli.errors import error_message
    from rag_pipeline.store.folders import FolderError

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


def psycopg_connect(conninfo: str) -> Any:
    """A plain connection (no pgvector types needed)."""
    import psycopg

    return psycopg.connect(conninfo)


def location(settings: Settings) -> str:
    from rag_pipeline.store.server import embedded_data_dir

    if settings.uses_embedded_database:
        return f"embedded PostgreSQL in {embedded_data_dir(settings)}"
    conninfo = settings.external_conninfo or ""
    # Never print a password.
    return conninfo.split("@")[-1] if "@" in conninfo else conninfo
