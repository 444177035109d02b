"""The BM25 statistics of the keyword leg: when to rebuild them, and how.

`rag.term_stats` (chunks per lexeme) and `rag.search_stats` (chunk count, mean length) are
rebuilt by `rag.refresh_term_stats()` (migration m003) whenever `rag.chunks_generation`, bumped
by every write to rag.chunks, has moved since the last rebuild. An indexer may call
`refresh_search_stats` after it commits; searchers also check by themselves.
"""

from dataclasses import dataclass

import psycopg

# Below this many chunks a rebuild takes well under a second: do it before the query, so
# results right after an ingest are exact; above it, rebuild in the background.
SYNC_REBUILD_CHUNKS = 20_000


@dataclass(frozen=True)
class StatsState:
    """What the stored statistics were built from, against the chunks' current generation."""

    generation: int
    built_generation: int | None
    built_chunks: int | None

    @property
    def fresh(self) -> bool:
        """True when no chunk changed since the statistics were built."""
        return self.built_generation == self.generation

    @property
    def rebuild_now(self) -> bool:
        """True when a stale rebuild should happen before the query rather than after."""
        return self.built_chunks is None or self.built_chunks < SYNC_REBUILD_CHUNKS


def stats_state(conn: psycopg.Connection) -> StatsState:
    """The generation of rag.chunks and of the stored statistics (one round trip)."""
    row = conn.execute(
        "SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END"
        "        FROM rag.chunks_generation),"
        " (SELECT generation FROM rag.search_stats), (SELECT chunks FROM rag.search_stats)"
    ).fetchone()
    assert row is not None
    return StatsState(int(row[0]), row[1], row[2])


def refresh_search_stats(conn: psycopg.Connection) -> None:
    """Rebuild the statistics if the chunks changed since the last rebuild (idempotent)."""
    conn.execute("SELECT rag.refresh_term_stats()")
    if not conn.autocommit:
        conn.commit()
