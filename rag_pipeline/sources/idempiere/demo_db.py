"""The demo iDempiere database: a real schema subset and real dictionary rows, embedded.

With no `IDEMPIERE_DB_*` configured, the iDempiere sources read `idempiere_demo`, a database
created beside the vector store (same server) from files shipped in the package
(`rag_pipeline/demo/idempiere/`, provenance in its README): the iDempiere fixture schema, the
dictionary rows of six iDempiere migration scripts, the classic core windows, tabs and
processes with their es_CO translations, and knowledge-base entries written for the demo.

Creation is idempotent and safe under concurrency: a session advisory lock serialises
creators, and the database's comment records the content fingerprint once loading committed.
A database without that comment (a load that died half-way) or with an older fingerprint
(a newer package) is dropped and loaded again.

This module creates and loads the database; the content comes from `demo_dictionary` (the
core dictionary CSVs) and `demo_knowledge_base` (knowledge_base.yaml), which it re-exports.
"""

import logging
from typing import Any, cast

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from rag_pipeline.settings import Settings
from rag_pipeline.sources.idempiere.demo_dictionary import load_core_dictionary
from rag_pipeline.sources.idempiere.demo_files import demo_fingerprint, demo_folder
from rag_pipeline.sources.idempiere.demo_knowledge_base import (
    KnowledgeBase,
    KnowledgeEntry,
    insert_entry,
    load_knowledge_base,
    read_knowledge_base,
)

logger = logging.getLogger(__name__)

DEMO_DATABASE = "idempiere_demo"
DEMO_CLIENT_ID = 11
# Any constant works: it only has to be the same in every process creating the demo.
_ADVISORY_LOCK_KEY = 0x1DE3_9E4E
_SQL_FILES = (
    "schema.sql",
    "k_entry_extensions_INFERRED.sql",
    "ad_rows_from_migrations.sql",
)


def admin_conninfo(conninfo: str) -> str:
    """The same server's maintenance database (`postgres`), as store/server.py uses it."""
    return make_conninfo(conninfo, dbname="postgres")


def ensure_demo_database(settings: Settings) -> str:
    """Create and load the demo database if it is missing or outdated; return its conninfo."""
    # Imported here: starting the embedded server is only needed when the demo is used.
    from rag_pipeline.store.server import resolve_conninfo

    return ensure_demo_database_on(resolve_conninfo(settings))


def ensure_demo_database_on(server_conninfo: str, name: str = DEMO_DATABASE) -> str:
    """`ensure_demo_database` on the server of `server_conninfo` (any database on it)."""
    fingerprint = demo_fingerprint()
    with psycopg.connect(admin_conninfo(server_conninfo), autocommit=True) as admin:
        if _comment(admin, name) != fingerprint:
            admin.execute("SELECT pg_advisory_lock(%s)", (_ADVISORY_LOCK_KEY,))
            try:
                # Re-read under the lock: another process may have loaded it while we waited.
                if _comment(admin, name) != fingerprint:
                    _create(admin, server_conninfo, name, fingerprint)
            finally:
                admin.execute("SELECT pg_advisory_unlock(%s)", (_ADVISORY_LOCK_KEY,))
    return make_conninfo(server_conninfo, dbname=name)


def _comment(admin: psycopg.Connection, name: str) -> str | None:
    row = admin.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
        (name,),
    ).fetchone()
    return None if row is None else cast(str | None, row[0])


def _create(admin: psycopg.Connection, server_conninfo: str, name: str, fingerprint: str) -> None:
    database = sql.Identifier(name)
    logger.info("creating the demo iDempiere database %s", name)
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(database))
    admin.execute(sql.SQL("CREATE DATABASE {}").format(database))
    with psycopg.connect(make_conninfo(server_conninfo, dbname=name)) as conn:
        load_demo_content(conn)
    # Written last, after the load committed: its presence means "complete".
    admin.execute(
        sql.SQL("COMMENT ON DATABASE {} IS {}").format(database, sql.Literal(fingerprint))
    )


def load_demo_content(conn: psycopg.Connection, *, knowledge_base: bool = True) -> None:
    """Load schema, dictionary and (optionally) knowledge base into an empty database.

    One transaction: committed when the `conn` context ends without an error.
    """
    folder = demo_folder()
    for file in _SQL_FILES:
        # Without parameters psycopg sends the file as one simple query (many statements).
        conn.execute(cast(Any, (folder / file).read_text(encoding="utf-8")))
    load_core_dictionary(conn)
    if knowledge_base:
        load_knowledge_base(conn, read_knowledge_base())


def load_schema_only(conn: psycopg.Connection, *, extended_k_entry: bool) -> None:
    """The fixture schema alone (tests build their own rows on it)."""
    folder = demo_folder()
    conn.execute(cast(Any, (folder / "schema.sql").read_text(encoding="utf-8")))
    if extended_k_entry:
        conn.execute(cast(Any, (folder / _SQL_FILES[1]).read_text(encoding="utf-8")))


def describe(conn: psycopg.Connection) -> dict[str, int]:
    """Row counts of the main tables (for logs and the README)."""
    counts: dict[str, int] = {}
    for table in ("ad_window", "ad_tab", "ad_field", "ad_table", "ad_process", "k_entry"):
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
        counts[table] = int(cast(tuple[int], row.fetchone())[0])
    return counts


__all__ = [
    "DEMO_CLIENT_ID",
    "DEMO_DATABASE",
    "KnowledgeBase",
    "KnowledgeEntry",
    "admin_conninfo",
    "demo_fingerprint",
    "demo_folder",
    "ensure_demo_database",
    "ensure_demo_database_on",
    "insert_entry",
    "load_demo_content",
    "load_knowledge_base",
    "load_schema_only",
    "read_knowledge_base",
]
