"""Read-only connections to the iDempiere database, configured or the bundled demo.

The sources only ever read, and they read a production ERP: every connection is opened with
`default_transaction_read_only=on`, so a bug (or a crafted value) can never write, whatever
privileges the configured role has.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from rag_pipeline.settings import Settings

_READ_ONLY_OPTION = "-c default_transaction_read_only=on"
APPLICATION_NAME = "rag_pipeline"


def read_only_conninfo(conninfo: str) -> str:
    """`conninfo` with read-only transactions forced (other `options` are kept)."""
    params = conninfo_to_dict(conninfo)
    options = str(params.get("options") or "").strip()
    merged = f"{options} {_READ_ONLY_OPTION}".strip()
    return make_conninfo(
        conninfo,
        options=merged,
        application_name=str(params.get("application_name") or APPLICATION_NAME),
    )


def configured_conninfo(settings: Settings) -> str | None:
    """The conninfo of `IDEMPIERE_DB_*`, or None when no host is set.

    Keyword form rather than a URL, so IDEMPIERE_DB_HOST may also be a Unix socket folder.
    """
    if settings.idempiere_db_host is None:
        return None
    password = settings.idempiere_db_password
    return make_conninfo(
        "",
        host=settings.idempiere_db_host,
        port=settings.idempiere_db_port,
        dbname=settings.idempiere_db_name,
        user=settings.idempiere_db_user,
        password=password.get_secret_value() if password is not None else None,
    )


def resolve_idempiere_conninfo(settings: Settings) -> str:
    """The iDempiere database: `IDEMPIERE_DB_*`, else the demo (created if needed)."""
    configured = configured_conninfo(settings)
    if configured is not None:
        return configured
    # Imported here: the demo loader pulls in the embedded server only when it is used.
    from rag_pipeline.sources.idempiere.demo_db import ensure_demo_database

    return ensure_demo_database(settings)


def connect_read_only(conninfo: str) -> psycopg.Connection:
    """A new connection whose transactions are all read-only.

    Autocommit: callers open short explicit transactions (`with conn.transaction()`), so the
    connection never sits idle in a transaction on the ERP's server between runs.
    """
    return psycopg.connect(read_only_conninfo(conninfo), autocommit=True)


@contextmanager
def read_only(conninfo: str) -> Iterator[psycopg.Connection]:
    """`connect_read_only` as a context manager that closes the connection."""
    conn = connect_read_only(conninfo)
    try:
        yield conn
    finally:
        conn.close()
