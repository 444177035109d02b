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
"""

import csv
import hashlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, cast

import psycopg
import yaml
from psycopg import sql
from psycopg.conninfo import make_conninfo

from rag_pipeline.settings import Settings
from rag_pipeline.sources.idempiere.languages import has_column

logger = logging.getLogger(__name__)

DEMO_DATABASE = "idempiere_demo"
DEMO_CLIENT_ID = 11
# Any constant works: it only has to be the same in every process creating the demo.
_ADVISORY_LOCK_KEY = 0x1DE3_9E4E
# When the classic core rows were last synchronised (release 9); used as their Updated.
_CORE_UPDATED = datetime(2022, 9, 1)
_SQL_FILES = (
    "schema.sql",
    "k_entry_extensions_INFERRED.sql",
    "ad_rows_from_migrations.sql",
)
_STRUCTURE_FILE = "core_structure_INFERRED.sql"
_KNOWLEDGE_BASE_FILE = "knowledge_base.yaml"
_EDIT_MODES = {"BLK", "GFM", "HTM", None}


def demo_folder() -> Path:
    """The folder of the shipped demo content."""
    return Path(__file__).resolve().parents[2] / "demo" / "idempiere"


@cache
def demo_fingerprint() -> str:
    """A hash of every shipped demo file: a changed file reloads the demo database."""
    digest = hashlib.sha256()
    for path in sorted(demo_folder().rglob("*")):
        # Notes about the data do not change it.
        if path.is_file() and path.suffix not in {".md", ".txt"}:
            digest.update(path.relative_to(demo_folder()).as_posix().encode())
            digest.update(path.read_bytes())
    return f"rag_pipeline idempiere demo {digest.hexdigest()[:16]}"


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


# --- the classic core dictionary (core_es_CO/*.csv) -------------------------------------------


@dataclass(frozen=True)
class _CoreTable:
    """One core_es_CO table: its CSVs, translated columns and the defaults of missing columns."""

    table: str
    columns: tuple[str, ...]
    defaults: tuple[tuple[str, object], ...]


_CORE_TABLES = (
    _CoreTable(
        "AD_Window",
        ("Name", "Description", "Help"),
        (("WindowType", "M"), ("EntityType", "D")),
    ),
    _CoreTable(
        "AD_Process",
        ("Name", "Description", "Help"),
        # Value (the search key) is not in the translation export: empty, not invented.
        (("Value", ""), ("AccessLevel", "3"), ("EntityType", "D")),
    ),
)


def _csv_rows(path: Path) -> Iterator[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        yield from csv.DictReader(handle)


def load_core_dictionary(conn: psycopg.Connection) -> None:
    """Core windows, processes and the tabs linked in core_structure_INFERRED.sql, EN + es_CO."""
    folder = demo_folder() / "core_es_CO"
    for spec in _CORE_TABLES:
        key = f"{spec.table}_ID"
        base = [r for r in _csv_rows(folder / f"{spec.table.lower()}.csv") if r[key]]
        _insert_base(conn, spec.table, key, spec.columns, spec.defaults, base)
        trl = [r for r in _csv_rows(folder / f"{spec.table.lower()}_trl_es_CO.csv") if r[key]]
        _insert_trl(conn, spec.table, key, spec.columns, trl)
    conn.execute(cast(Any, (demo_folder() / _STRUCTURE_FILE).read_text(encoding="utf-8")))
    structure = {
        str(r[0]): r[1:]
        for r in conn.execute(
            "SELECT AD_Tab_ID::text, AD_Window_ID, AD_Table_ID, SeqNo, TabLevel FROM demo_core_tab"
        )
    }
    tabs = [r for r in _csv_rows(folder / "ad_tab.csv") if r["AD_Tab_ID"] in structure]
    tab_columns = ("Name", "Description", "Help", "CommitWarning")
    _insert_base(
        conn,
        "AD_Tab",
        "AD_Tab_ID",
        tab_columns,
        (("EntityType", "D"),),
        tabs,
        extra=("AD_Window_ID", "AD_Table_ID", "SeqNo", "TabLevel"),
        extra_values=structure,
    )
    trl = [r for r in _csv_rows(folder / "ad_tab_trl_es_CO.csv") if r["AD_Tab_ID"] in structure]
    _insert_trl(conn, "AD_Tab", "AD_Tab_ID", tab_columns, trl)
    conn.execute("DROP TABLE demo_core_tab")


def _blank_to_none(value: str | None) -> str | None:
    return value.strip() if value and value.strip() else None


def _insert_base(
    conn: psycopg.Connection,
    table: str,
    key: str,
    columns: Sequence[str],
    defaults: Sequence[tuple[str, object]],
    rows: Sequence[dict[str, str]],
    *,
    extra: Sequence[str] = (),
    extra_values: Mapping[str, Sequence[object]] | None = None,
) -> None:
    names = [
        key,
        *columns,
        *(d[0] for d in defaults),
        *extra,
        "AD_Client_ID",
        "AD_Org_ID",
        "CreatedBy",
        "UpdatedBy",
        "Created",
        "Updated",
    ]
    statement = sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING").format(
        sql.Identifier(table.lower()),
        sql.SQL(", ").join(sql.Identifier(n.lower()) for n in names),
        sql.SQL(", ").join(sql.Placeholder() * len(names)),
    )
    values = [
        (
            int(row[key]),
            *(_blank_to_none(row.get(c)) for c in columns),
            *(d[1] for d in defaults),
            *((extra_values or {}).get(row[key], ())),
            0,
            0,
            100,
            100,
            _CORE_UPDATED,
            _CORE_UPDATED,
        )
        for row in rows
    ]
    with conn.cursor() as cur:
        cur.executemany(statement, values)


def _insert_trl(
    conn: psycopg.Connection,
    table: str,
    key: str,
    columns: Sequence[str],
    rows: Sequence[dict[str, str]],
) -> None:
    names = [key, "AD_Language", *columns, "IsTranslated"]
    names += ["AD_Client_ID", "AD_Org_ID", "CreatedBy", "UpdatedBy", "Created", "Updated"]
    # Only rows whose base record was loaded (the tab CSV is a sample; ids may collide).
    statement = sql.SQL(
        "INSERT INTO {trl} ({names}) SELECT {values} WHERE EXISTS "
        "(SELECT 1 FROM {base} WHERE {key} = %s) ON CONFLICT DO NOTHING"
    ).format(
        trl=sql.Identifier(f"{table}_trl".lower()),
        names=sql.SQL(", ").join(sql.Identifier(n.lower()) for n in names),
        values=sql.SQL(", ").join(sql.Placeholder() * len(names)),
        base=sql.Identifier(table.lower()),
        key=sql.Identifier(key.lower()),
    )
    values = [
        (
            int(row[key]),
            row["AD_Language"],
            # Name is NOT NULL in every _Trl table: an empty translation keeps an empty string.
            *(
                (row.get(c) or "").strip() if c == "Name" else _blank_to_none(row.get(c))
                for c in columns
            ),
            row.get("IsTranslated") or "N",
            0,
            0,
            100,
            100,
            _CORE_UPDATED,
            _CORE_UPDATED,
            int(row[key]),
        )
        for row in rows
    ]
    with conn.cursor() as cur:
        cur.executemany(statement, values)


# --- the knowledge base (knowledge_base.yaml) -------------------------------------------------


@dataclass(frozen=True)
class KnowledgeEntry:
    """One K_Entry of the demo, with its translations (language → name, keywords, text)."""

    id: int
    topic: int
    edit_mode: str | None
    name: str
    keywords: str | None
    url: str | None
    text: str
    client_id: int
    active: bool
    public: bool
    valid_to: datetime | None
    updated: datetime
    translations: dict[str, dict[str, str]]


@dataclass(frozen=True)
class KnowledgeBase:
    """The demo's knowledge types, topics and entries."""

    client_id: int
    updated: datetime
    types: list[dict[str, Any]]
    topics: list[dict[str, Any]]
    entries: list[KnowledgeEntry]


def _timestamp(value: object) -> datetime | None:
    if value is None:
        return None
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def read_knowledge_base(path: Path | None = None) -> KnowledgeBase:
    """Parse knowledge_base.yaml (or another file of the same shape)."""
    raw = cast(
        dict[str, Any],
        yaml.safe_load((path or demo_folder() / _KNOWLEDGE_BASE_FILE).read_text("utf-8")),
    )
    client_id = int(raw["client_id"])
    updated = _timestamp(raw["updated_default"]) or datetime(2026, 1, 1)
    entries: list[KnowledgeEntry] = []
    for item in cast(list[dict[str, Any]], raw["entries"]):
        if item.get("edit_mode") not in _EDIT_MODES:
            raise ValueError(f"K_Entry {item['id']}: unknown edit_mode {item['edit_mode']!r}")
        entries.append(
            KnowledgeEntry(
                id=int(item["id"]),
                topic=int(item["topic"]),
                edit_mode=item.get("edit_mode"),
                name=str(item["name"]),
                keywords=item.get("keywords"),
                url=item.get("url"),
                text=str(item["text"]),
                client_id=int(item.get("client_id", client_id)),
                active=bool(item.get("active", True)),
                public=bool(item.get("public", True)),
                valid_to=_timestamp(item.get("valid_to")),
                updated=_timestamp(item.get("updated")) or updated,
                translations=cast(dict[str, dict[str, str]], item.get("translations") or {}),
            )
        )
    return KnowledgeBase(client_id, updated, raw["types"], raw["topics"], entries)


def _yn(flag: bool) -> str:
    return "Y" if flag else "N"


def load_knowledge_base(conn: psycopg.Connection, kb: KnowledgeBase) -> None:
    """Insert types, topics, entries and (if the table exists) their translations."""
    std = (kb.client_id, 0, 100, 100, kb.updated, kb.updated)
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO k_type (k_type_id, name, description, ad_client_id, ad_org_id, "
            "createdby, updatedby, created, updated) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [(t["id"], t["name"], t.get("description"), *std) for t in kb.types],
        )
        cur.executemany(
            "INSERT INTO k_topic (k_topic_id, k_type_id, name, description, ad_client_id, "
            "ad_org_id, createdby, updatedby, created, updated) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [(t["id"], t["type"], t["name"], t.get("description"), *std) for t in kb.topics],
        )
    for entry in kb.entries:
        insert_entry(conn, entry)


def has_extended_k_entry(conn: psycopg.Connection) -> bool:
    """True if K_Entry has the K_EntryEditMode column (the extension script was applied)."""
    return has_column(conn, "k_entry", "k_entryeditmode")


def insert_entry(conn: psycopg.Connection, entry: KnowledgeEntry) -> None:
    """Insert one entry (and its translations where the schema has K_Entry_Trl)."""
    extended = has_extended_k_entry(conn)
    columns = [
        "k_entry_id",
        "k_topic_id",
        "name",
        "keywords",
        "descriptionurl",
        "textmsg",
        "rating",
        "ad_client_id",
        "ad_org_id",
        "isactive",
        "ispublic",
        "validto",
        "created",
        "updated",
        "createdby",
        "updatedby",
    ]
    values: list[object] = [
        entry.id,
        entry.topic,
        entry.name,
        entry.keywords,
        entry.url,
        entry.text,
        0,
        entry.client_id,
        0,
        _yn(entry.active),
        _yn(entry.public),
        entry.valid_to,
        entry.updated,
        entry.updated,
        100,
        100,
    ]
    if extended:
        columns.append("k_entryeditmode")
        values.append(entry.edit_mode)
    conn.execute(
        sql.SQL("INSERT INTO k_entry ({}) VALUES ({})").format(
            sql.SQL(", ").join(map(sql.Identifier, columns)),
            sql.SQL(", ").join(sql.Placeholder() * len(columns)),
        ),
        values,
    )
    if not extended:
        return
    for language, trl in entry.translations.items():
        conn.execute(
            "INSERT INTO k_entry_trl (k_entry_id, ad_language, name, keywords, textmsg, "
            "istranslated, ad_client_id, ad_org_id, created, updated, createdby, updatedby) "
            "VALUES (%s, %s, %s, %s, %s, 'Y', %s, 0, %s, %s, 100, 100)",
            (
                entry.id,
                language,
                trl.get("name") or "",
                trl.get("keywords"),
                trl.get("text"),
                entry.client_id,
                entry.updated,
                entry.updated,
            ),
        )


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
    "demo_folder",
    "ensure_demo_database",
    "ensure_demo_database_on",
    "insert_entry",
    "load_demo_content",
    "load_schema_only",
    "read_knowledge_base",
]
