"""Vector search over chunks, one hit per parent section, with the parent's full text."""

import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import psycopg
from psycopg import sql

from rag_pipeline.core.embedding import Embedder
from rag_pipeline.runtime import load_embedder, ready_conninfo
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.store.connection import connect

Expand = Literal["parent", "chunk"]
# Several chunks of one section collapse into one hit, so fetch more chunks than hits; when a
# few long sections hold most of the nearest chunks, widen the pool until there are enough.
_CANDIDATES_PER_HIT = 4
_MAX_CANDIDATES = 4000


@dataclass(frozen=True)
class SearchHit:
    """One matching parent section, represented by its best chunk."""

    source_type: str
    source_id: str
    language: str
    title: str
    breadcrumb: str
    section_title: str
    heading_path: list[str]
    url: str
    score: float
    text: str  # the best-matching chunk
    parent_text: str  # the whole section ('' when expand='chunk')
    document_id: str
    section_id: str
    chunk_id: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return asdict(self)


_SQL = """
WITH nearest AS (
    SELECT c.id, c.section_id, c.embedding <=> %(query)s AS distance
    FROM rag.chunks c
    WHERE (%(source_types)s::text[] IS NULL OR c.source_type = ANY(%(source_types)s))
      AND (%(languages)s::text[] IS NULL OR c.language = ANY(%(languages)s)
           OR split_part(c.language, '_', 1) = ANY(%(languages)s))
    ORDER BY c.embedding <=> %(query)s
    LIMIT %(candidates)s
), best AS (
    SELECT DISTINCT ON (section_id) id, section_id, distance
    FROM nearest ORDER BY section_id, distance, id
)
SELECT d.source_type, d.source_id, d.language, d.title, d.breadcrumb, s.title, s.heading_path,
       d.url, 1 - best.distance, c.text, CASE WHEN %(with_parent)s THEN s.text ELSE '' END,
       d.id, s.id, c.id
FROM best
JOIN rag.chunks c ON c.id = best.id
JOIN rag.sections s ON s.id = best.section_id
JOIN rag.documents d ON d.id = c.document_id
WHERE 1 - best.distance >= %(min_score)s
ORDER BY best.distance, c.id
LIMIT %(top_k)s
"""


class Searcher:
    """A database and a model, ready to answer queries (reuse it: loading costs ~0.5 s)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        conninfo: str | None = None,
    ):
        """Use the configured database (or `conninfo`) and model (or `embedder`)."""
        self.settings = settings or load_settings()
        self.conninfo = conninfo or ready_conninfo(self.settings)
        self.embedder = embedder or load_embedder(self.settings)

    def search(
        self,
        query: str,
        *,
        top_k: int = 10,
        source_types: Sequence[str] | None = None,
        languages: Sequence[str] | None = None,
        min_score: float = -1.0,
        expand: Expand = "parent",
    ) -> list[SearchHit]:
        """The `top_k` best sections for `query`, best first."""
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        vector = self.embedder.embed_query(query).astype(np.float32)
        candidates = top_k * _CANDIDATES_PER_HIT
        with connect(self.conninfo) as conn:
            # Iterative scans keep a filtered HNSW query from coming back short (pgvector 0.8).
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            while True:
                # ef_search bounds how many candidates one HNSW scan returns.
                ef_search = max(40, min(candidates, 1000))
                # SET takes no bind parameters; Literal renders the integer safely.
                conn.execute(
                    sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef_search))
                )
                rows = conn.execute(
                    _SQL,
                    {
                        "query": vector,
                        "source_types": list(source_types) if source_types else None,
                        "languages": list(languages) if languages else None,
                        "candidates": candidates,
                        "with_parent": expand == "parent",
                        "min_score": min_score,
                        "top_k": top_k,
                    },
                ).fetchall()
                if len(rows) >= top_k or candidates >= _MAX_CANDIDATES:
                    break
                if not self._more_chunks_than(conn, candidates):
                    break
                candidates *= 4
        return [
            SearchHit(
                source_type=r[0],
                source_id=r[1],
                language=r[2],
                title=r[3],
                breadcrumb=r[4],
                section_title=r[5],
                heading_path=list(r[6]),
                url=r[7],
                score=float(r[8]),
                text=r[9],
                parent_text=r[10],
                document_id=r[11],
                section_id=r[12],
                chunk_id=r[13],
            )
            for r in rows
        ]

    @staticmethod
    def _more_chunks_than(conn: "psycopg.Connection", candidates: int) -> bool:
        row = conn.execute(_COUNT_SQL, (candidates, candidates + 1)).fetchone()
        return bool(row and row[0])


_COUNT_SQL = "SELECT count(*) > %s FROM (SELECT 1 FROM rag.chunks LIMIT %s) AS c"

_default: Searcher | None = None
_default_lock = threading.Lock()


def search(
    query: str,
    *,
    top_k: int = 10,
    source_types: Sequence[str] | None = None,
    languages: Sequence[str] | None = None,
    min_score: float = -1.0,
    expand: Expand = "parent",
) -> list[SearchHit]:
    """Search the configured index (a `Searcher` built from the environment, kept for reuse)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Searcher()
    return _default.search(
        query,
        top_k=top_k,
        source_types=source_types,
        languages=languages,
        min_score=min_score,
        expand=expand,
    )
