"""One document's lineage as `rag show` and the MCP tool `get_document_lineage` give it.

Read-only: the document as indexed, the partitions that list it, each stage that built its
current version (run id, input and output hash, code version, time, from
`rag.document_versions`), stages that failed since with their reason (`rag.ingest_errors`), its
sections and chunks (whether each vector was computed or reused from the embedding cache) and
the versions kept. `lineage_json` is the one JSON shape both commands print.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import psycopg
from psycopg.rows import dict_row

from rag_pipeline.core.stages import RAW, stored_name
from rag_pipeline.core.version_diff import (
    ChunkSnapshot,
    SectionSnapshot,
    VersionDiff,
    VersionSnapshot,
    diff_versions,
)

_DOCUMENT_COLUMNS: Final = (
    "id, source_type, doc_key, source_id, language, title, breadcrumb, url, original_format,"
    " source_version, content_hash, input_hash, model_id, ingested_at"
)


class UnknownDocumentError(LookupError):
    """No indexed document matches the target, or several do."""


@dataclass(frozen=True)
class VersionRow:
    """One kept version of a document, as `rag.document_versions` holds it."""

    version: int
    source_version: str
    content_hash: str
    input_hash: str
    model_id: str
    run_id: str | None
    ingested_at: datetime
    title: str
    stages: list[dict[str, Any]]
    sections: list[dict[str, Any]]
    chunks: list[dict[str, Any]]
    body: str


def resolve(
    conn: psycopg.Connection,
    target: str,
    *,
    source_type: str | None = None,
    language: str | None = None,
) -> str:
    """The document id `target` names: a document, chunk or section id, or a source id.

    Raises UnknownDocumentError (one line) when nothing, or more than one document, matches.
    """
    row = conn.execute(
        "SELECT id FROM rag.documents WHERE id = %(t)s"
        " UNION SELECT document_id FROM rag.chunks WHERE id = %(t)s"
        " UNION SELECT document_id FROM rag.sections WHERE id = %(t)s",
        {"t": target},
    ).fetchone()
    if row is not None:
        return str(row[0])
    rows = conn.execute(
        "SELECT id, source_type, language FROM rag.documents"
        " WHERE (source_id = %(t)s OR doc_key = %(t)s)"
        " AND (%(s)s::text IS NULL OR source_type = %(s)s)"
        " AND (%(l)s::text IS NULL OR language = %(l)s) ORDER BY source_type, language",
        {"t": target, "s": source_type, "l": language},
    ).fetchall()
    if not rows:
        raise UnknownDocumentError(f"no indexed document, chunk or source id {target!r}")
    if len(rows) > 1:
        found = ", ".join(f"--source {r[1]} --lang {r[2]}" for r in rows[:10])
        raise UnknownDocumentError(
            f"{len(rows)} documents have source id {target!r}; choose one with {found}"
        )
    return str(rows[0][0])


def versions(conn: psycopg.Connection, document_id: str) -> list[VersionRow]:
    """Every kept version of a document, newest first."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            "SELECT version, source_version, content_hash, input_hash, model_id, run_id,"
            " ingested_at, title, stages, sections, chunks, body FROM rag.document_versions"
            " WHERE document_id = %s ORDER BY version DESC",
            (document_id,),
        ).fetchall()
    return [VersionRow(**row) for row in rows]


def lineage_json(
    conn: psycopg.Connection, document_id: str, *, ui_url: str | None = None
) -> dict[str, Any]:
    """The lineage of an indexed document as one JSON object (see the module docstring)."""
    with conn.cursor(row_factory=dict_row) as cur:
        doc = cur.execute(
            f"SELECT {_DOCUMENT_COLUMNS} FROM rag.documents WHERE id = %s", (document_id,)
        ).fetchone()
    if doc is None:
        raise UnknownDocumentError(f"no indexed document {document_id!r}")
    kept = versions(conn, document_id)
    current = kept[0] if kept else None
    document = {k: _plain(v) for k, v in doc.items()}
    document["partitions"] = _partitions(conn, doc["source_type"], doc["doc_key"])
    document["fetched_at"] = _fetched_at(conn, doc["source_type"], doc["doc_key"])
    stages = [dict(s, status="ok") for s in (current.stages if current else [])]
    since = current.ingested_at if current else doc["ingested_at"]
    stages += _failures(conn, doc["source_type"], doc["doc_key"], since)
    for stage in stages:
        stage["run_url"] = run_url(ui_url, stage.get("run_id"))
    sections, chunks = _sections_and_chunks(conn, document_id, current)
    return {
        "document": document,
        "stages": stages,
        "sections": sections,
        "chunks": chunks,
        "versions": [
            {
                "version": v.version,
                "source_version": v.source_version,
                "content_hash": v.content_hash,
                "run_id": v.run_id,
                "run_url": run_url(ui_url, v.run_id),
                "at": v.ingested_at.isoformat(),
                "title": v.title,
                "sections": len(v.sections),
                "chunks": len(v.chunks),
                "current": v is current,
            }
            for v in kept
        ],
    }


def run_url(ui_url: str | None, run_id: str | None) -> str | None:
    """The Dagster UI page of a run, when the webserver's URL is configured."""
    return f"{ui_url.rstrip('/')}/runs/{run_id}" if ui_url and run_id else None


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _partitions(conn: psycopg.Connection, source_type: str, doc_key: str) -> list[str]:
    rows = conn.execute(
        "SELECT partition_key FROM rag.document_partitions"
        " WHERE source_type = %s AND doc_key = %s ORDER BY partition_key",
        (source_type, doc_key),
    ).fetchall()
    return [str(r[0]) for r in rows]


def _fetched_at(conn: psycopg.Connection, source_type: str, doc_key: str) -> str | None:
    row = conn.execute(
        "SELECT updated_at FROM rag.stage_documents WHERE asset_key = %s AND doc_key = %s",
        (stored_name(source_type, RAW), doc_key),
    ).fetchone()
    return row[0].isoformat() if row else None


def _failures(
    conn: psycopg.Connection, source_type: str, doc_key: str, since: datetime
) -> list[dict[str, Any]]:
    """The newest failure of each stage since the current version was indexed."""
    rows = conn.execute(
        "SELECT DISTINCT ON (stage) stage, run_id, reason, created_at FROM rag.ingest_errors"
        " WHERE source_type = %s AND source_id = %s AND created_at > %s"
        " ORDER BY stage, created_at DESC",
        (source_type, doc_key, since),
    ).fetchall()
    return [
        {"stage": r[0], "status": "failed", "run_id": r[1], "reason": r[2], "at": r[3].isoformat()}
        for r in sorted(rows, key=lambda r: r[3])
    ]


def _sections_and_chunks(
    conn: psycopg.Connection, document_id: str, current: VersionRow | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    computed = {c["id"]: c.get("computed") for c in (current.chunks if current else [])}
    chunk_rows = conn.execute(
        "SELECT id, ordinal, section_id, token_count, text_sha256 FROM rag.chunks"
        " WHERE document_id = %s ORDER BY ordinal",
        (document_id,),
    ).fetchall()
    chunks = [
        {
            "id": r[0],
            "ordinal": r[1],
            "section_id": r[2],
            "token_count": r[3],
            "sha256": r[4],
            "vector": _vector_origin(computed.get(r[0])),
        }
        for r in chunk_rows
    ]
    tokens: dict[str, int] = {}
    for chunk in chunks:
        tokens[chunk["section_id"]] = tokens.get(chunk["section_id"], 0) + chunk["token_count"]
    section_rows = conn.execute(
        "SELECT id, ordinal, title, heading_path FROM rag.sections"
        " WHERE document_id = %s ORDER BY ordinal",
        (document_id,),
    ).fetchall()
    sections = [
        {
            "id": r[0],
            "ordinal": r[1],
            "title": r[2],
            "heading_path": r[3],
            "tokens": tokens.get(r[0], 0),
        }
        for r in section_rows
    ]
    return sections, chunks


def _vector_origin(computed: bool | None) -> str:
    if computed is None:
        return "unknown"
    return "computed" if computed else "reused"


def snapshot(row: VersionRow) -> VersionSnapshot:
    """A version as the diff reads it."""
    return VersionSnapshot(
        version=row.version,
        body=row.body,
        sections=[
            SectionSnapshot(
                title=s["title"],
                heading_path=tuple(s["heading_path"]),
                start_char=s["start_char"],
                end_char=s["end_char"],
                sha256=s["sha256"],
            )
            for s in row.sections
        ],
        chunks=[ChunkSnapshot(c["sha256"], c.get("computed")) for c in row.chunks],
        title=row.title,
    )


def version_diff(
    conn: psycopg.Connection, document_id: str, against: int | None = None
) -> VersionDiff:
    """What changed from version `against` (default: the one before) to the current one."""
    kept = versions(conn, document_id)
    if not kept:
        raise UnknownDocumentError(f"no versions kept of document {document_id!r}")
    current = kept[0]
    if against is None:
        if len(kept) < 2:
            raise UnknownDocumentError(
                f"only one version of document {document_id!r} is kept: nothing to compare"
            )
        older = kept[1]
    else:
        found = [v for v in kept if v.version == against]
        if not found:
            numbers = ", ".join(str(v.version) for v in kept)
            raise UnknownDocumentError(f"no version {against} kept (kept: {numbers})")
        older = found[0]
    return diff_versions(snapshot(older), snapshot(current))


def lineage_of(
    conn: psycopg.Connection,
    target: str,
    *,
    source_type: str | None = None,
    language: str | None = None,
    ui_url: str | None = None,
) -> dict[str, Any]:
    """`lineage_json` of the document `target` names (see `resolve`)."""
    document_id = resolve(conn, target, source_type=source_type, language=language)
    return lineage_json(conn, document_id, ui_url=ui_url)
