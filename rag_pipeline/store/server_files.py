"""What the embedded server's data folder holds that we write: its password and its config.

The superuser's password is kept in RAG_HOME/pgpass; `pg_hba.conf` requires it on the local
socket and rejects TCP; `rag_pipeline.conf`, included from `postgresql.conf`, names the socket
folder of each start and gives large index writes their WAL budget. Every file is written
private to the server user (0600).
"""

import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rag_pipeline.store.server_process import check_binaries, run
from rag_pipeline.store.server_user import ServerUser, server_bin_dir

SUPERUSER = "postgres"
_HBA = (
    "# Written by rag_pipeline: local socket only, and only with the password in RAG_HOME.\n"
    "local   all   all                 scram-sha-256\n"
    "host    all   all   0.0.0.0/0     reject\n"
    "host    all   all   ::/0          reject\n"
)
_CONF_INCLUDE = "include_if_exists = 'rag_pipeline.conf'\n"


def passfile(home: Path) -> Path:
    """The libpq password file of the embedded server (0600)."""
    return home / "pgpass"


def superuser_password(home: Path) -> tuple[str, bool]:
    """The superuser's password from RAG_HOME/pgpass, and whether it was made just now."""
    path = passfile(home)
    if path.exists():
        line = path.read_text(encoding="utf-8").strip().splitlines()[0]
        return line.rsplit(":", 1)[1], False
    password = secrets.token_urlsafe(32)  # [A-Za-z0-9_-]: nothing to escape anywhere
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(fd, "w", encoding="utf-8") as out:
        out.write(f"*:*:*:{SUPERUSER}:{password}\n")
    return password, True


def initdb(pgdata: Path, user: ServerUser, password: str) -> None:
    """Create the data folder with the superuser's password and our `pg_hba.conf`."""
    pgdata.mkdir(mode=0o700, exist_ok=True)
    if user.as_root:
        os.chown(pgdata, user.uid, user.gid)
    check_binaries(pgdata, user)
    with _password_file(password, user) as pwfile:
        run(
            user,
            pgdata,
            [
                str(server_bin_dir(user) / "initdb"),
                "--auth-local=scram-sha-256",
                "--auth-host=reject",
                "--encoding=utf8",
                "-U",
                SUPERUSER,
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


def set_password(pgdata: Path, user: ServerUser, password: str) -> None:
    """Give the superuser `password` and require it (`pg_hba.conf`) from now on."""
    # Single-user mode: no socket, no authentication, nothing else running.
    run(
        user,
        pgdata,
        [
            str(server_bin_dir(user) / "postgres"),
            "--single",
            "-D",
            user.data_arg(pgdata),
            "postgres",
        ],
        stdin=f"ALTER ROLE {SUPERUSER} PASSWORD '{password}';\n",
    )
    _write_private(pgdata / "pg_hba.conf", _HBA, user)


def is_secured(pgdata: Path) -> bool:
    """Whether the data folder's `pg_hba.conf` is ours (password on the socket only)."""
    try:
        return (pgdata / "pg_hba.conf").read_text(encoding="utf-8") == _HBA
    except OSError:
        return False


# A large first ingest writes WAL fast (two HNSW indexes): at 100,000 documents, with the 1 GB
# default, the server checkpointed every 11 s and its log said so; after each checkpoint the
# next change of every page logs the whole page again. 4 GB keeps checkpoints on their timer.
WAL_BUDGET = "max_wal_size = 4GB\n"


def write_config(pgdata: Path, user: ServerUser, socket_dir: Path) -> None:
    """Point the server at `socket_dir` (socket only, 0700) through our config file."""
    directory = str(socket_dir).replace("'", "''")
    _write_private(
        pgdata / "rag_pipeline.conf",
        "# Written by rag_pipeline at every start.\n"
        "listen_addresses = ''\n"
        f"unix_socket_directories = '{directory}'\n"
        "unix_socket_permissions = 0700\n" + WAL_BUDGET,
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
