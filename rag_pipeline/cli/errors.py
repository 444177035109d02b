"""One line for each failure a user can fix, instead of a traceback: the cause and the fix.

Used by the CLI's `errors_as_messages`; no Dagster, no click here, so every command module
(and the search and ask commands) can share it.
"""

import errno
import os

from rag_pipeline.settings import ConfigError
from rag_pipeline.settings.trust import UntrustedConfigError

# The embedded server's pgserver-era lock: a stale one owned by another user broke every start.
_PGSERVER_LOCK = ".lockfile"
# strerror(ENOSPC) ("No space left on device"), lowercased, as messages and logs carry it.
_NO_SPACE = "no space left"


def error_message(exc: BaseException, *, home: str = "RAG_HOME") -> str | None:
    """The one-line message for a known failure, or None for a bug (keep its traceback).

    Args:
        exc: The exception a command raised.
        home: The RAG_HOME folder, named in messages about files.
    """
    import psycopg

    from rag_pipeline.core.embedding import EmbeddingModelError
    from rag_pipeline.store.backup import BackupError
    from rag_pipeline.store.migrations import ModelMismatchError
    from rag_pipeline.store.server import EmbeddedServerError

    known = (
        ConfigError,
        UntrustedConfigError,
        EmbeddingModelError,
        ModelMismatchError,
        BackupError,
        EmbeddedServerError,
    )
    if isinstance(exc, known):
        detail = _one_line(str(exc))
        if _NO_SPACE in detail.lower():  # initdb, pg_ctl or pg_dump on a full disk
            return f"the disk is full ({detail}): free space on it and run the command again"
        return detail
    if isinstance(exc, psycopg.errors.DiskFull):
        return (
            "the database's disk is full: free space on the disk of its data folder "
            f"({home}/pgdata for the embedded one) and run the command again"
        )
    if isinstance(exc, psycopg.OperationalError):
        full = full_disk(home)
        if full is not None:
            # The embedded server stops when its disk fills (a WAL write fails): the
            # connection goes away, and the full disk is the reason (issue 49).
            return full
        return _database_message(exc)
    if isinstance(exc, OSError):
        return _os_message(exc, home)
    storage = _dagster_storage_message(exc, home)
    if storage is not None:
        return storage
    # A known failure wrapped by a library (Dagster re-raises what a step or its storage hit).
    cause = exc.__cause__ or exc.__context__
    return error_message(cause, home=home) if cause is not None else None


def _dagster_storage_message(exc: BaseException, home: str) -> str | None:
    """Dagster's SQLite run storage (DAGSTER_HOME) failing: a full disk, mostly."""
    import sqlite3

    if not isinstance(exc, sqlite3.OperationalError) and not type(exc).__module__.startswith(
        "sqlalchemy"
    ):
        return None
    detail = _one_line(str(exc).split("\n", 1)[0])[:200]
    lowered = detail.lower()
    if "disk" in lowered or "full" in lowered:
        # SQLite says "disk I/O error" for a full disk too; the free space tells them apart.
        storage = os.environ.get("DAGSTER_HOME") or os.path.join(home, "dagster")
        if _no_space_left(storage):
            return (
                f"Dagster's run storage cannot be written, its disk is full ({detail}): free "
                f"space on the disk of DAGSTER_HOME ({storage}) and run the command again"
            )
        return (
            f"Dagster's run storage cannot be written ({detail}); free space on the disk of "
            "DAGSTER_HOME (RAG_HOME/dagster by default) and run the command again"
        )
    return f"Dagster's run storage failed ({detail}); check DAGSTER_HOME (RAG_HOME/dagster)"


def _database_message(exc: BaseException) -> str:
    detail = _one_line(str(exc))
    lowered = detail.lower()
    if _NO_SPACE in lowered or "could not extend file" in lowered:
        return (
            f"the database's disk is full ({detail}); free space on that disk and run the "
            "command again"
        )
    if "closed the connection" in lowered or "terminating connection" in lowered:
        return (
            f"the vector database went away during the command ({detail}); run it again "
            "(the embedded server starts by itself; an external one must be running)"
        )
    return (
        f"cannot reach the vector database ({detail}); check RAG_VECTORDB_URL or "
        "RAG_VECTORDB_PG_HOST/PORT and that the server runs, or unset them to use the "
        "embedded one"
    )


def _os_message(exc: OSError, home: str) -> str:
    path = exc.filename or ""
    where = f" ({path})" if path else ""
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        return f"the disk is full{where}: free space on it and run the command again"
    if exc.errno == errno.EROFS or (
        exc.errno in (errno.EACCES, errno.EPERM) and str(path).startswith(home)
    ):
        return (
            f"{home} is not writable{where}: {reason}; point RAG_HOME at a folder you can "
            "write (the embedded database, model links and run state live there)"
        )
    if os.path.basename(str(path)) == _PGSERVER_LOCK:
        return (
            f"the lock file {path} belongs to another user ({reason}); remove it, or ask its "
            "owner to"
        )
    return f"{reason}{where}"


def full_disk(home: str) -> str | None:
    """The message naming a full disk under the embedded database of `home` (RAG_HOME) or
    DAGSTER_HOME, or None when both have room (or `home` is not a folder path)."""
    places = []
    if os.path.isabs(home) and os.path.isdir(os.path.join(home, "pgdata")):
        places.append((os.path.join(home, "pgdata"), "the embedded database"))
    storage = os.environ.get("DAGSTER_HOME") or (
        os.path.join(home, "dagster") if os.path.isabs(home) else ""
    )
    if storage:
        places.append((storage, "Dagster's run storage (DAGSTER_HOME)"))
    for path, what in places:
        if _no_space_left(path):
            return (
                f"the disk is full: {what} cannot be written ({path}); free space on it and "
                "run the command again"
            )
    return None


def _no_space_left(path: str) -> bool:
    """Whether the disk of `path` (or of its nearest existing parent) has no free block."""
    folder = os.path.abspath(path)
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    try:
        return os.statvfs(folder).f_bavail == 0
    except OSError:
        return False


def _one_line(text: str) -> str:
    return " ".join(text.split())
