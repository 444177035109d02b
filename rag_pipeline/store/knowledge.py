"""What the agent tools ask of the index besides search: statistics, dictionary lookups by exact
name or identifier, and which documents are developer documentation."""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

# Application Dictionary documents are `AD_<Entity>:<id>`; the entity names a person uses.
AD_ENTITY_PREFIXES = {
    "window": "AD_Window",
    "tab": "AD_Tab",
    "field": "AD_Field",
    "process": "AD_Process",
    "table": "AD_Table",
}
# A DB identifier (C_BPartner_ID, M_Locator, DocumentNo): searched as a whole word in bodies.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class SourceCount:
    """Documents and chunks of one source in one language."""

    source_type: str
    language: str
    documents: int
    chunks: int


@dataclass(frozen=True)
class LastRun:
    """The newest ingest run of one source."""

    source_type: str
    partition_key: str
    run_id: str
    finished_at: datetime
    stats: dict[str, Any]


@dataclass(frozen=True)
class KnowledgeStats:
    """What the index holds."""

    counts: tuple[SourceCount, ...]
    model_id: str | None
    dimension: int | None
    last_runs: tuple[LastRun, ...]


@dataclass(frozen=True)
class ADEntity:
    """One Application Dictionary document found by exact name or identifier."""

    entity_type: str  # window, tab, field, process, table (or the raw prefix)
    source_id: str
    language: str
    title: str
    breadcrumb: str
    url: str
    match: str  # source_id, name, identifier (the one it defines) or mention
    body: str


def knowledge_stats(conn: psycopg.Connection) -> KnowledgeStats:
    """Documents and chunks per source and language, the model, the last run per source."""
    counts = conn.execute(
        "SELECT d.source_type, d.language, count(*),"
        " (SELECT count(*) FROM rag.chunks c WHERE c.source_type = d.source_type"
        "  AND c.language = d.language)"
        " FROM rag.documents d GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    info = dict(
        conn.execute(
            "SELECT key, value FROM rag.store_info WHERE key IN ('model_id', 'dimension')"
        ).fetchall()
    )
    runs = conn.execute(
        "SELECT DISTINCT ON (source_type) source_type, partition_key, run_id, finished_at, stats"
        " FROM rag.ingest_runs ORDER BY source_type, finished_at DESC"
    ).fetchall()
    return KnowledgeStats(
        counts=tuple(SourceCount(r[0], r[1], int(r[2]), int(r[3])) for r in counts),
        model_id=info.get("model_id"),
        dimension=int(info["dimension"]) if "dimension" in info else None,
        last_runs=tuple(LastRun(r[0], r[1], r[2], r[3], dict(r[4] or {})) for r in runs),
    )


def find_ad_entities(
    conn: psycopg.Connection,
    name: str,
    *,
    source_type: str,
    entity_type: str | None = None,
    languages: Sequence[str] | None = None,
    limit: int = 10,
) -> list[ADEntity]:
    """Dictionary documents (of `source_type`, which the source declares) whose source id,
    name or DB identifier is exactly `name`.

    Order: the source id (`AD_Window:143`); the name as shown (`Sales Order`) or the identifier
    the entry defines (a table's TableName or key column `<TableName>_ID`, a field's ColumnName,
    a process's search key); the tabs and fields of a table of that name; then entries whose
    text mentions the identifier as a whole word. Case is ignored throughout.
    """
    name = name.strip()
    prefix = AD_ENTITY_PREFIXES.get(entity_type or "", entity_type or "")
    identifier = name if _IDENTIFIER.fullmatch(name) else None
    rows = conn.execute(
        r"""
        WITH candidates AS (
            SELECT source_id, language, title, breadcrumb, url, body,
                   CASE WHEN lower(source_id) = lower(%(name)s) THEN 0
                        WHEN lower(title) = lower(%(name)s) THEN 1
                        WHEN lower(%(name)s) IN (lower(metadata ->> 'column_name'),
                                                 lower(metadata ->> 'value'))
                             OR (source_id LIKE 'AD\_Table:%%'
                                 AND lower(%(name)s) IN (lower(metadata ->> 'table_name'),
                                                         lower(metadata ->> 'table_name')
                                                         || '_id'))
                             THEN 2
                        WHEN lower(metadata ->> 'table_name') = lower(%(name)s) THEN 3
                        ELSE 4 END AS rank
            FROM rag.documents
            WHERE source_type = %(source_type)s
              AND (%(prefix)s = '' OR source_id LIKE %(prefix_like)s)
              AND (%(languages)s::text[] IS NULL OR language = ANY(%(languages)s)
                   OR split_part(language, '_', 1) = ANY(%(languages)s))
              AND (lower(source_id) = lower(%(name)s)
                   OR lower(title) = lower(%(name)s)
                   OR lower(%(name)s) IN (lower(metadata ->> 'column_name'),
                                          lower(metadata ->> 'value'),
                                          lower(metadata ->> 'table_name'))
                   OR (%(identifier)s::text IS NOT NULL
                       AND body ~* ('\m' || %(identifier)s::text || '\M')))
        )
        SELECT * FROM candidates
        -- Among equals, the broader entry first: a table before its windows, tabs and fields.
        ORDER BY rank,
                 array_position(ARRAY['AD_Table', 'AD_Window', 'AD_Process', 'AD_Tab',
                                      'AD_Field'], split_part(source_id, ':', 1)),
                 title, source_id, language
        LIMIT %(limit)s
        """,
        {
            "name": name,
            "source_type": source_type,
            "prefix": prefix,
            "prefix_like": _like_prefix(prefix) + ":%",
            "languages": list(languages) if languages else None,
            "identifier": identifier,
            "limit": limit,
        },
    ).fetchall()
    matches = ("source_id", "name", "identifier", "mention", "mention")
    return [
        ADEntity(
            entity_type=entity_of(r[0]),
            source_id=r[0],
            language=r[1],
            title=r[2],
            breadcrumb=r[3],
            url=r[4],
            match=matches[r[6]],
            body=r[5],
        )
        for r in rows
    ]


def entity_of(source_id: str) -> str:
    """`AD_Window:143` → `window` (an unknown prefix is returned as it is)."""
    prefix = source_id.split(":", 1)[0]
    for entity, known in AD_ENTITY_PREFIXES.items():
        if prefix == known:
            return entity
    return prefix


def developer_documents(
    conn: psycopg.Connection, names: Sequence[str]
) -> set[tuple[str, str, str]]:
    """(source_type, source_id, language) of the documents that are developer documentation.

    A document is one when a wiki category, a front-matter tag or its title contains one of
    `names`, ignoring case and treating '_' as a space (`Plug-In_Development` ⊃ `plug-in`).
    """
    patterns = [f"%{_like_prefix(_normalise(n))}%" for n in names if n.strip()]
    if not patterns:
        return set()
    rows = conn.execute(
        """
        SELECT source_type, source_id, language FROM rag.documents d
        WHERE lower(replace(d.title, '_', ' ')) LIKE ANY(%(patterns)s)
           OR EXISTS (
               SELECT 1 FROM jsonb_array_elements_text(
                   CASE WHEN jsonb_typeof(d.metadata -> 'categories') = 'array'
                        THEN d.metadata -> 'categories' ELSE '[]'::jsonb END
                   || CASE WHEN jsonb_typeof(d.metadata -> 'tags') = 'array'
                           THEN d.metadata -> 'tags' ELSE '[]'::jsonb END
               ) AS label(name)
               WHERE lower(replace(regexp_replace(label.name, '^Category:', ''), '_', ' '))
                     LIKE ANY(%(patterns)s))
        """,
        {"patterns": patterns},
    ).fetchall()
    return {(r[0], r[1], r[2]) for r in rows}


def _normalise(name: str) -> str:
    return name.strip().removeprefix("Category:").replace("_", " ").lower()


def _like_prefix(text: str) -> str:
    """`text` with LIKE's wildcards escaped (the default escape character is a backslash)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
