"""The Dagster instance the `rag` command and `dagster` share, and its storage.

`DAGSTER_HOME` if set, else `RAG_HOME/dagster` (exported, so `dagster` started from `rag`
uses it too). Its `dagster.yaml` is written here, from the environment:

- `DAGSTER_PG_URL` (a `postgresql://` URL) or `DAGSTER_PG_HOST` (+ `DAGSTER_PG_PORT/DB/USER/
  PASSWORD`): Dagster's runs, events and schedules in PostgreSQL (dagster-postgres), read
  from the environment by Dagster itself, so no password is written to the file;
- `DAGSTER_PG_URL=embedded`: a `dagster` database in the embedded PostgreSQL of `RAG_HOME`,
  so `rag dev` keeps the index and Dagster's own storage on one server;
- neither: SQLite files in `DAGSTER_HOME`.

A `dagster.yaml` we wrote (first line `MANAGED_MARKER`) is rewritten when it differs from
what the environment asks for; any other is refused, never used: Dagster builds objects from
its logging section (`"()": subprocess.Popen` runs a command), so `rag` runs only the file it
writes. The folder must be the user's own and not writable by others (`settings/trust.py`).
"""

import os
from pathlib import Path
from typing import Any

from rag_pipeline.settings import Settings
from rag_pipeline.settings.trust import UntrustedConfigError, owned_folder

MANAGED_MARKER = "# written by rag_pipeline (orchestration/instance.py); rag uses no other"
# What earlier versions wrote as their first line: theirs is ours too.
_EARLIER_MARKERS = (
    "# written by rag_pipeline (rag_pipeline/instance.py)",
    "# written by rag_pipeline (orchestration/instance.py)",
)
EMBEDDED = "embedded"
DAGSTER_DATABASE = "dagster"
# What earlier versions wrote: ours too, so it is upgraded.
_LEGACY_YAML = "telemetry:\n  enabled: false\n"

_TELEMETRY = """telemetry:
  enabled: false
"""

_POSTGRES_URL = """storage:
  postgres:
    postgres_url:
      env: DAGSTER_PG_URL
"""

_POSTGRES_PARTS = """storage:
  postgres:
    postgres_db:
      hostname:
        env: DAGSTER_PG_HOST
      port:
        env: DAGSTER_PG_PORT
      db_name:
        env: DAGSTER_PG_DB
      username:
        env: DAGSTER_PG_USER
      password:
        env: DAGSTER_PG_PASSWORD
"""


def storage_kind(environ: dict[str, str] | None = None) -> str:
    """`postgres_url`, `postgres_parts` or `sqlite`, from the environment."""
    env = os.environ if environ is None else environ
    if env.get("DAGSTER_PG_URL"):
        return "postgres_url"
    if env.get("DAGSTER_PG_HOST"):
        return "postgres_parts"
    return "sqlite"


def dagster_yaml(kind: str, settings: Settings | None = None) -> str:
    """The dagster.yaml for a storage kind: telemetry off, every run's timeout (catalog runs
    and backfills carry no definition's tag) and pool limits (`instance_yaml`), the storage."""
    from rag_pipeline.orchestration.executors import instance_yaml

    storage = {"postgres_url": _POSTGRES_URL, "postgres_parts": _POSTGRES_PARTS}.get(kind, "")
    return f"{MANAGED_MARKER}\n{_TELEMETRY}{instance_yaml(settings)}{storage}"


def prepare_environment(settings: Settings) -> None:
    """Resolve `DAGSTER_PG_URL=embedded` and fill defaults of `DAGSTER_PG_*` (exported)."""
    if os.environ.get("DAGSTER_PG_URL") == EMBEDDED:
        os.environ["DAGSTER_PG_URL"] = embedded_dagster_url(settings)
    if os.environ.get("DAGSTER_PG_HOST"):
        for name, default in (
            ("DAGSTER_PG_PORT", "5432"),
            ("DAGSTER_PG_DB", "dagster"),
            ("DAGSTER_PG_USER", "postgres"),
            ("DAGSTER_PG_PASSWORD", ""),
        ):
            os.environ.setdefault(name, default)


def embedded_dagster_url(settings: Settings) -> str:
    """The URL of the `dagster` database in the embedded server (created if missing)."""
    import psycopg
    from psycopg import sql

    from rag_pipeline.store.server import EMBEDDED_DATABASE, resolve_conninfo

    rag_url = resolve_conninfo(settings.model_copy(update={"vectordb_url": None}))
    with psycopg.connect(rag_url, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (DAGSTER_DATABASE,)
        ).fetchone()
        if exists is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DAGSTER_DATABASE)))
    return rag_url.replace(f"/{EMBEDDED_DATABASE}?", f"/{DAGSTER_DATABASE}?", 1)


def dagster_home(settings: Settings) -> Path:
    """DAGSTER_HOME if set, else `RAG_HOME/dagster`, with the dagster.yaml the env asks for.

    Raises:
        UntrustedConfigError: The folder is another user's or others can write it, or its
            `dagster.yaml` is not one `rag` wrote (Dagster runs what its logging section names).
    """
    prepare_environment(settings)
    configured = os.environ.get("DAGSTER_HOME")
    if configured:
        home = Path(configured)
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        owned_folder(home, "DAGSTER_HOME", repair=False)
    else:
        settings.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        owned_folder(settings.home, "RAG_HOME")
        home = settings.home / "dagster"
        home.mkdir(mode=0o700, exist_ok=True)
        owned_folder(home, "DAGSTER_HOME")
    _write_config(home / "dagster.yaml", dagster_yaml(storage_kind(), settings))
    return home


def _write_config(config: Path, wanted: str) -> None:
    """Write `wanted` unless the file holds it already; refuse a file `rag` did not write."""
    current = config.read_text(encoding="utf-8") if config.exists() else None
    if current == wanted:
        return
    ours = current is None or (
        current.startswith((MANAGED_MARKER, *_EARLIER_MARKERS)) or current == _LEGACY_YAML
    )
    if not ours:
        raise UntrustedConfigError(
            f"{config} was not written by rag (its content differs from what rag writes, "
            "and Dagster would run what its logging section names): move it away and rag "
            "writes its own"
        )
    # Written beside and renamed over: the old file's owner and mode are not kept.
    partial = config.with_name(f".{config.name}.{os.getpid()}")
    partial.write_text(wanted, encoding="utf-8")
    partial.replace(config)


def dagster_instance(settings: Settings) -> Any:
    """The persistent Dagster instance of `dagster_home(settings)`.

    Two commands opening a new instance at once would both create its SQLite storage and one
    fails (`UNIQUE constraint failed: alembic_version`): the first opening is serialised with
    a file lock, and the storage is created before the lock is released.
    """
    import fcntl

    import dagster as dg

    home = dagster_home(settings)
    os.environ["DAGSTER_HOME"] = str(home)
    with (home / ".rag-instance.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        instance = dg.DagsterInstance.get()
        instance.get_runs(limit=1)  # creates or migrates the run storage now, under the lock
    return instance
