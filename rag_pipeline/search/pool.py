"""One connection pool per database and process, shared by every Searcher.

Concurrent callers queue for a pooled connection (up to `search_pool_timeout` seconds) instead
of each opening its own and exhausting the server's `max_connections`. Each connection is set
up once — pgvector types and the HNSW scan settings — so a query is one round trip. After a
server restart the pooled connections are dead: the first query that fails on one has the pool
check (and replace) every idle connection, then runs again.
"""

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg_pool import ConnectionPool

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class PoolSettings:
    """How big a pool is and how its connections scan the HNSW index."""

    size: int = 8
    timeout: float = 30.0
    ef_search: int = 100


_pools: dict[tuple[str, PoolSettings], "ConnectionPool[psycopg.Connection]"] = {}
_lock = threading.Lock()


def _configure(ef_search: int) -> Callable[[psycopg.Connection], None]:
    def configure(conn: psycopg.Connection) -> None:
        register_vector(conn)
        # Iterative scans keep a filtered HNSW query from coming back short (pgvector 0.8);
        # relaxed order is re-sorted by the query itself. SET takes no bind parameters.
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(ef_search)))

    return configure


def get_pool(conninfo: str, settings: PoolSettings) -> "ConnectionPool[psycopg.Connection]":
    """The process's pool for `conninfo` (opened on first use)."""
    key = (conninfo, settings)
    with _lock:
        pool = _pools.get(key)
        if pool is None:
            pool = ConnectionPool[psycopg.Connection](
                conninfo,
                min_size=1,
                max_size=settings.size,
                timeout=settings.timeout,
                kwargs={"autocommit": True},
                configure=_configure(settings.ef_search),
                name=f"rag-search-{len(_pools)}",
                open=True,
            )
            _pools[key] = pool
        return pool


def run(pool: "ConnectionPool[psycopg.Connection]", work: Callable[[psycopg.Connection], T]) -> T:
    """Run `work` on a pooled connection, once more on a fresh one if the server went away."""
    try:
        with pool.connection() as conn:
            return work(conn)
    except psycopg.OperationalError as exc:
        logger.info("search connection lost (%s); checking the pool and retrying", exc)
        pool.check()
        with pool.connection() as conn:
            return work(conn)


def close_pools(conninfo: str | None = None) -> None:
    """Close this process's pools (of one database, or all), e.g. before dropping it."""
    with _lock:
        keys = [key for key in _pools if conninfo is None or key[0] == conninfo]
        pools = [_pools.pop(key) for key in keys]
    for pool in pools:
        pool.close()
