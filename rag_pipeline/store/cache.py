"""The embedding cache: one vector per (model id, sha256 of the embedded text)."""

from collections.abc import Sequence

import numpy as np
import psycopg
from numpy.typing import NDArray

_BATCH = 1000


def cached_vectors(
    conn: psycopg.Connection, model_id: str, shas: Sequence[str]
) -> dict[str, NDArray[np.float32]]:
    """The cached vectors among `shas`."""
    found: dict[str, NDArray[np.float32]] = {}
    unique = sorted(set(shas))
    for start in range(0, len(unique), _BATCH):
        rows = conn.execute(
            "SELECT text_sha256, embedding FROM rag.embedding_cache"
            " WHERE model_id = %s AND text_sha256 = ANY(%s)",
            (model_id, unique[start : start + _BATCH]),
        ).fetchall()
        for sha, vector in rows:
            found[sha] = np.asarray(
                vector.to_numpy() if hasattr(vector, "to_numpy") else vector, dtype=np.float32
            )
    return found


def store_vectors(
    conn: psycopg.Connection, model_id: str, items: Sequence[tuple[str, NDArray[np.float32]]]
) -> None:
    """Add vectors to the cache; ones another run stored meanwhile are left as they are."""
    if not items:
        return
    with conn.transaction(), conn.cursor() as cur:
        # COPY cannot skip conflicts, so load a temporary table and insert from it.
        cur.execute(
            "CREATE TEMPORARY TABLE IF NOT EXISTS embedding_cache_load"
            " (text_sha256 text, embedding vector) ON COMMIT DELETE ROWS"
        )
        with cur.copy(
            "COPY embedding_cache_load (text_sha256, embedding) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "vector"])
            for sha, vector in items:
                copy.write_row([sha, vector])
        cur.execute(
            "INSERT INTO rag.embedding_cache (model_id, text_sha256, embedding)"
            " SELECT DISTINCT ON (text_sha256) %s, text_sha256, embedding"
            " FROM embedding_cache_load ON CONFLICT DO NOTHING",
            (model_id,),
        )
