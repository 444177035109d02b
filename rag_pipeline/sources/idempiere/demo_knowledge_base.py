"""The knowledge base of the demo (knowledge_base.yaml): read into records, inserted as rows.

Types, topics and entries go into K_Type, K_Topic and K_Entry; the entries' translations go
into K_Entry_Trl and their edit mode into K_EntryEditMode only where the schema has them (the
extension script applied), so the same records fill the plain and the extended schema.
"""

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import psycopg
import yaml
from psycopg import sql

from rag_pipeline.sources.idempiere.demo_files import demo_folder
from rag_pipeline.sources.idempiere.languages import has_column

_KNOWLEDGE_BASE_FILE = "knowledge_base.yaml"
_EDIT_MODES = {"BLK", "GFM", "HTM", None}


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
