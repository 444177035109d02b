"""Running the embedded PostgreSQL's programs as its server user, and where its socket is.

Every program (`initdb`, `pg_ctl`, `postgres`) runs through `run` with the server user's
identity and working folder (`server_user.py`); `postmaster.pid` says whether a server runs
and where its socket is.
"""

import os
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import IO

from rag_pipeline.store.server_user import EmbeddedServerError, ServerUser, server_bin_dir

_SOCKET_NAME = ".s.PGSQL.5432"
# sun_path holds 108 bytes on Linux and 104 on macOS, the terminating NUL included.
_MAX_SOCKET_PATH = 100
# What one failed start can have logged, and more than enough to find its FATAL line.
_LOG_READ_LIMIT = 1 << 20


def private_socket(socket_dir: Path, pgdata: Path, user: ServerUser) -> bool:
    """Whether the socket folder is the data folder, or a 0700 folder of the server user."""
    if socket_dir == pgdata:
        return True
    try:
        info = os.lstat(socket_dir)
    except OSError:
        return False
    private = stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700
    return private and info.st_uid == user.uid


def new_socket_dir(pgdata: Path, user: ServerUser) -> Path:
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


def postmaster(pgdata: Path) -> Path | None:
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


def check_binaries(pgdata: Path, user: ServerUser) -> None:
    """Fail with the fix named when the server user cannot run the binaries."""
    binaries = server_bin_dir(user)
    try:
        run(user, pgdata, [str(binaries / "postgres"), "--version"])
    except (OSError, EmbeddedServerError) as exc:
        raise EmbeddedServerError(
            f"the embedded PostgreSQL must run as user {user.name}, which cannot run "
            f"{binaries} ({str(exc).splitlines()[0]}); run rag as a normal user, or set "
            "RAG_VECTORDB_URL"
        ) from None


def pg_ctl(
    user: ServerUser,
    pgdata: Path,
    args: list[str],
    *,
    check: bool = True,
    stdout: IO[bytes] | None = None,
) -> None:
    """Run `pg_ctl` on the data folder; with `check=False` a failure is ignored."""
    command = [str(server_bin_dir(user) / "pg_ctl"), *args, "-D", user.data_arg(pgdata)]
    try:
        run(user, pgdata, command, stdout=stdout)
    except EmbeddedServerError:
        if check:
            raise


def run(
    user: ServerUser,
    pgdata: Path,
    command: list[str],
    *,
    stdin: str | None = None,
    stdout: IO[bytes] | None = None,
) -> None:
    """Run a program of the server as its user; a failure raises `EmbeddedServerError`."""
    # A file, not a pipe, for the server's output: a pipe the postmaster inherits would keep
    # this call waiting for its end.
    logged_from = stdout.tell() if stdout is not None else 0
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
        log = pgdata.parent / "postgres.log"
        if isinstance(result.stderr, str):
            detail = result.stderr.strip()
        else:
            reason = _logged_failure(log, logged_from, pgdata)
            detail = f"{reason} (see {log})" if reason else ""
        name = Path(command[0]).name
        raise EmbeddedServerError(
            f"{name} failed for the embedded PostgreSQL in {pgdata}: {detail or 'see ' + str(log)}"
        )


def _logged_failure(log: Path, start: int, pgdata: Path) -> str:
    """Why a command writing to the server's log failed: its last FATAL or PANIC line there.

    `pg_ctl start` only says "could not start server"; the reason (a full disk: "could not
    write lock file") is in the log. A log that could not be written says nothing, so a disk
    with no space left is named then.
    """
    try:
        with log.open("rb") as handle:
            handle.seek(start)
            text = handle.read(_LOG_READ_LIMIT).decode(errors="replace")
    except OSError:
        text = ""
    for line in reversed(text.splitlines()):
        for level in ("PANIC:", "FATAL:"):
            if level in line:
                return " ".join(line[line.index(level) :].split())
    try:
        full = os.statvfs(pgdata).f_bavail == 0
    except OSError:
        full = False
    return "No space left on device" if full else ""
