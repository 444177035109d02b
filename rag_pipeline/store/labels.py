"""Which labelled documents the index holds: a labelled set's names checked before scoring.

A label names a document as `rag eval` does: `(source_type, source_id)`, equal to the stored
source id or its end after a `/` (a files document is stored by its full path, labelled by its
path inside the ingested folder).
"""

from collections.abc import Iterable

import psycopg

DocKey = tuple[str, str]


def held_documents(conn: psycopg.Connection, keys: Iterable[DocKey]) -> set[DocKey]:
    """The `keys` that name at least one document in rag.documents."""
    wanted = sorted(set(keys))
    if not wanted:
        return set()
    rows = conn.execute(
        "SELECT l.source_type, l.source_id"
        " FROM unnest(%(types)s::text[], %(ids)s::text[]) AS l(source_type, source_id)"
        " WHERE EXISTS (SELECT 1 FROM rag.documents d WHERE d.source_type = l.source_type"
        "  AND (d.source_id = l.source_id"
        "   OR right(d.source_id, length(l.source_id) + 1) = '/' || l.source_id))",
        {"types": [k[0] for k in wanted], "ids": [k[1] for k in wanted]},
    ).fetchall()
    return {(str(row[0]), str(row[1])) for row in rows}
