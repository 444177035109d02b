"""The versions of each indexed document (`rag.document_versions`), written with the index.

Each time the index writer (`store/index_writer.py`) writes a partition, `record_versions`
snapshots the written documents as new versions, inside the same transaction: the source
version, the sanitized Markdown, the sections' offsets and hashes, the chunks' hashes and token
counts, whether each chunk's vector was computed by this run (else it came from the embedding
cache), and every stage's run id, input and output hash and code version. All of it is copied
from the rows just written, in SQL: nothing is sent twice over the wire.

A document rewritten with the same content (a forced run) keeps its version, whose lineage is
updated to the new runs. The oldest versions beyond `keep` earlier ones are pruned. History of
deleted documents goes with them (the trigger of migration m010).
"""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import psycopg
from psycopg.types.json import Jsonb

from rag_pipeline.core.stages import EMBEDDINGS, stored_names

Change = Literal["added", "changed", "deleted", "failed"]


@dataclass(frozen=True)
class DocumentChange:
    """One document an index write added, changed, deleted or failed."""

    change: Change
    source_id: str
    language: str
    source_version: str
    reason: str = ""


# Every stage row of the document (`d`), with the stage's code version, then the index itself.
# `stages` maps each stored name of the source's stages to its stage, given by Python.
_STAGES_SQL: Final = """
COALESCE((SELECT jsonb_agg(jsonb_build_object(
            'stage', %(stages)s::jsonb ->> s.asset_key,
            'run_id', s.run_id, 'input_hash', s.input_hash, 'output_hash', s.content_hash,
            'code_version', %(code_versions)s::jsonb ->> (%(stages)s::jsonb ->> s.asset_key),
            'at', s.updated_at)
            ORDER BY array_position(%(assets)s::text[], s.asset_key))
          FROM rag.stage_documents s
          WHERE s.asset_key = ANY(%(assets)s::text[]) AND s.doc_key = d.doc_key), '[]'::jsonb)
|| jsonb_build_array(jsonb_build_object(
     'stage', %(embeddings)s::text, 'run_id', %(run_id)s::text, 'input_hash', d.input_hash,
     'output_hash', (SELECT encode(sha256(convert_to(
                        COALESCE(string_agg(c.text_sha256, ',' ORDER BY c.ordinal), ''),
                        'UTF8')), 'hex') FROM rag.chunks c WHERE c.document_id = d.id),
     'code_version', %(code_versions)s::jsonb ->> 'embeddings', 'at', d.ingested_at))
"""

_SECTIONS_SQL: Final = """
COALESCE((SELECT jsonb_agg(jsonb_build_object(
            'id', s.id, 'ordinal', s.ordinal, 'title', s.title,
            'heading_path', to_jsonb(s.heading_path), 'start_char', s.start_char,
            'end_char', s.end_char, 'sha256', encode(sha256(convert_to(s.text, 'UTF8')), 'hex'))
            ORDER BY s.ordinal)
          FROM rag.sections s WHERE s.document_id = d.id), '[]'::jsonb)
"""

# `computed` holds the texts this run embedded (every text of a first ingest). `= ANY` of an
# array the plan holds as a constant is a hash lookup (PostgreSQL 14+). `IN (SELECT unnest())`
# was hashed only while the planner thought the list fitted in work_mem; past ~100,000 texts it
# scanned the list once per chunk: 10+ minutes at 100,000 documents instead of a second.
_CHUNKS_SQL: Final = """
COALESCE((SELECT jsonb_agg(jsonb_build_object(
            'id', c.id, 'ordinal', c.ordinal, 'section_id', c.section_id,
            'token_count', c.token_count, 'sha256', c.text_sha256,
            'computed', c.text_sha256 = ANY(%(computed)s::text[]))
            ORDER BY c.ordinal)
          FROM rag.chunks c WHERE c.document_id = d.id), '[]'::jsonb)
"""

_LATEST: Final = """
SELECT DISTINCT ON (document_id) document_id, version, content_hash, input_hash
FROM rag.document_versions
WHERE source_type = %(source)s AND doc_key = ANY(%(keys)s::text[])
ORDER BY document_id, version DESC
"""

_INSERT_NEW: Final = f"""
WITH latest AS ({_LATEST})
INSERT INTO rag.document_versions (
    document_id, version, source_type, doc_key, source_id, language, title, source_version,
    content_hash, input_hash, model_id, run_id, ingested_at, stages, sections, chunks, body)
SELECT d.id, COALESCE(l.version, 0) + 1, d.source_type, d.doc_key, d.source_id, d.language,
       d.title, d.source_version, d.content_hash, d.input_hash, d.model_id, %(run_id)s,
       d.ingested_at, {_STAGES_SQL}, {_SECTIONS_SQL}, {_CHUNKS_SQL}, d.body
FROM rag.documents d LEFT JOIN latest l ON l.document_id = d.id
WHERE d.source_type = %(source)s AND d.doc_key = ANY(%(keys)s::text[])
  AND (l.version IS NULL OR l.content_hash <> d.content_hash OR l.input_hash <> d.input_hash)
RETURNING version, source_id, language, source_version
"""

# The same content written again: the version stays, its lineage follows the new runs.
_UPDATE_SAME: Final = f"""
WITH latest AS ({_LATEST})
UPDATE rag.document_versions v
SET run_id = %(run_id)s, ingested_at = d.ingested_at, stages = {_STAGES_SQL},
    source_version = d.source_version, title = d.title
FROM rag.documents d JOIN latest l ON l.document_id = d.id
WHERE v.document_id = l.document_id AND v.version = l.version
  AND d.source_type = %(source)s AND d.doc_key = ANY(%(keys)s::text[])
  AND l.content_hash = d.content_hash AND l.input_hash = d.input_hash
"""

_PRUNE: Final = """
DELETE FROM rag.document_versions v
USING (SELECT document_id, max(version) AS newest FROM rag.document_versions
       WHERE source_type = %(source)s AND doc_key = ANY(%(keys)s::text[])
       GROUP BY document_id) m
WHERE v.document_id = m.document_id AND v.version < m.newest - %(keep)s
"""

# Documents with history but no row any more: deleted in this transaction (the trigger that
# drops their history runs at commit). The anti-join reads only the (source, key) index.
_DELETED: Final = """
SELECT DISTINCT ON (v.document_id) v.source_id, v.language, v.source_version
FROM rag.document_versions v
WHERE v.source_type = %(source)s AND v.doc_key IN (
    SELECT h.doc_key FROM rag.document_versions h
    WHERE h.source_type = %(source)s AND NOT EXISTS (
        SELECT 1 FROM rag.documents d WHERE d.source_type = h.source_type
        AND d.doc_key = h.doc_key))
ORDER BY v.document_id, v.version DESC
"""


def record_versions(
    conn: psycopg.Connection,
    *,
    run_id: str,
    source_type: str,
    keys: Sequence[str],
    computed: Collection[str],
    code_versions: Mapping[str, str],
    keep: int,
) -> list[DocumentChange]:
    """Snapshot the documents just written to the index; return what was added or changed.

    `computed` are the sha256 of the chunk texts this run embedded; `code_versions` maps each
    stage (raw … embeddings) to its code version; `keep` earlier versions survive per document.
    Call it inside the index's write transaction, after the documents are written.
    """
    if not keys:
        return []
    names = stored_names(source_type)
    params = {
        "run_id": run_id,
        "source": source_type,
        "keys": list(keys),
        "computed": sorted(computed),
        "code_versions": Jsonb(dict(code_versions)),
        "assets": list(names),
        "stages": Jsonb(names),
        "embeddings": EMBEDDINGS,
        "keep": keep,
    }
    # Never prepared: a prepared statement may get a generic plan, in which the arrays are
    # parameters, and `= ANY` of a parameter is a linear scan per row.
    conn.execute(_UPDATE_SAME, params, prepare=False)
    rows = conn.execute(_INSERT_NEW, params, prepare=False).fetchall()
    conn.execute(_PRUNE, params, prepare=False)
    return [
        DocumentChange("added" if r[0] == 1 else "changed", r[1], r[2], r[3])
        for r in sorted(rows, key=lambda r: (r[1], r[2]))
    ]


def deleted_documents(conn: psycopg.Connection, source_type: str) -> list[DocumentChange]:
    """The source's documents deleted by the current transaction (before it commits)."""
    rows = conn.execute(_DELETED, {"source": source_type}).fetchall()
    return [DocumentChange("deleted", r[0], r[1], r[2]) for r in sorted(rows)]
