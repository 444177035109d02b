"""One connection pool per database and process, shared by every Searcher and agent tool.

Concurrent callers queue for a pooled connection (up to `search_pool_timeout` seconds) instead
of each opening its own and exhausting the server's `max_connections`. Each connection is set
up once — pgvector types, the HNSW scan settings and a `statement_timeout` — so a query is one
round trip and none can pin the server.

A long-running process (the MCP server, an application holding a Searcher) must outlive its
server: `rag stop`, a crash of the postmaster, a restart. At most once a second, before a call,
the pool asks `resolve` (for the embedded server: `ready_conninfo`, which restarts a stopped
server; a file check when it runs); a call that fails for a lost connection (one left over from
a previous server) re-resolves, rebuilds the pool and runs once more. Connections are not
checked when taken: that cost every query one more round trip, and the retry replaces a stale
one anyway (every call the pool runs reads, or rebuilds statistics idempotently). A statement
cancelled (its timeout, or `Interrupt.cancel`) is an answer, not a lost connection: it is
never retried.

`Interrupt` lets another thread cancel what a call is running — the MCP server uses it when the
client that asked goes away.
"""

import logging
import threading
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

import psycopg
from pgvector.psycopg import register_vector
from psycopg import errors, sql
from psycopg_pool import ConnectionPool, PoolTimeout

from rag_pipeline.settings import Settings

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A checkout waiting this long looks whether the pool failed to connect meanwhile (seconds).
_PROBE_SECONDS = 1.0
# A pool replaced after a lost server is closed this many seconds later.
_CLOSE_OLD_POOL_AFTER = 10.0
# How long a lost server is waited for, its restart included.
_RECOVER_SECONDS = 20.0
# `resolve` is asked before a call at most this often (seconds): a file read and a lock.
_RESOLVE_EVERY = 1.0


@dataclass(frozen=True)
class PoolSettings:
    """How big a pool is and how its connections scan the HNSW index and bound statements."""

    size: int = 8
    timeout: float = 30.0
    ef_search: int = 100
    statement_timeout_ms: int = 5000


class Interrupted(psycopg.errors.QueryCanceled):
    """The call was interrupted (`Interrupt.cancel`) before its statement started."""


class Interrupt:
    """A handle another thread uses to cancel the statements of one call.

    Bind it in the thread doing the work (`with interrupt.bound(): ...`); every pooled
    statement run there is cancelled by `cancel()`, and later ones fail at once.
    """

    def __init__(self) -> None:
        """A handle not yet cancelled."""
        self._lock = threading.Lock()
        self._connections: set[psycopg.Connection] = set()
        self.cancelled = False

    @contextmanager
    def bound(self) -> Generator["Interrupt"]:
        """Make this the interrupt of the current thread's pooled statements for a while."""
        token = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(token)

    def cancel(self) -> None:
        """Cancel the statements running now and refuse the next ones."""
        with self._lock:
            self.cancelled = True
            running = list(self._connections)
        for conn in running:
            try:
                conn.cancel_safe(timeout=5.0)
            except Exception as exc:  # the connection may be gone already
                logger.debug("could not cancel a statement: %s", exc)

    @contextmanager
    def _running(self, conn: psycopg.Connection) -> Generator[None]:
        with self._lock:
            if self.cancelled:
                raise Interrupted("the request was cancelled")
            self._connections.add(conn)
        try:
            yield
        finally:
            with self._lock:
                self._connections.discard(conn)


_current: ContextVar[Interrupt | None] = ContextVar("rag_search_interrupt", default=None)


def _configure(settings: PoolSettings) -> Callable[[psycopg.Connection], None]:
    def configure(conn: psycopg.Connection) -> None:
        register_vector(conn)
        # Iterative scans keep a filtered HNSW query from coming back short (pgvector 0.8);
        # relaxed order is re-sorted by the query itself. SET takes no bind parameters.
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(settings.ef_search)))
        conn.execute(
            sql.SQL("SET statement_timeout = {}").format(sql.Literal(settings.statement_timeout_ms))
        )

    return configure


class SearchPool:
    """A connection pool that finds its database again after the server went away."""

    def __init__(
        self,
        conninfo: str,
        settings: PoolSettings,
        resolve: Callable[[], str] | None = None,
        name: str = "rag-search",
    ) -> None:
        """Pool connections to `conninfo`; `resolve` (if any) gives the URL again, starting
        the server when it must: at most once a second before a call, and after a lost
        connection."""
        self.settings = settings
        self._resolve = resolve
        self._name = name
        self._lock = threading.Lock()
        self._generation = 0
        self._resolved_at = time.monotonic()
        self._conninfo = conninfo
        self._pool = self._open(conninfo)
        self._recover_lock = threading.Lock()

    @property
    def conninfo(self) -> str:
        """The URL the pool connects to now."""
        with self._lock:
            return self._conninfo

    def _open(self, conninfo: str) -> "ConnectionPool[psycopg.Connection]":
        return ConnectionPool[psycopg.Connection](
            conninfo,
            min_size=1,
            max_size=self.settings.size,
            timeout=self.settings.timeout,
            kwargs={"autocommit": True},
            configure=_configure(self.settings),
            name=f"{self._name}-{self._generation}",
            open=True,
        )

    def _current(self) -> tuple["ConnectionPool[psycopg.Connection]", int]:
        with self._lock:
            return self._pool, self._generation

    def _rebuild(self, seen: int, conninfo: str) -> "ConnectionPool[psycopg.Connection]":
        """A new pool to `conninfo`, unless another thread rebuilt it since generation `seen`."""
        with self._lock:
            if self._generation != seen:
                return self._pool
            old = self._pool
            self._generation += 1
            self._conninfo = conninfo
            self._pool = self._open(conninfo)
            pool = self._pool
        # Connections of the old pool still in use belong to a dead server; their calls fail
        # and retry on the new pool. Closed a little later: callers waiting on it meanwhile
        # move to the new pool by themselves, rather than all failing at once.
        threading.Thread(target=_close_later, args=(old,), daemon=True).start()
        return pool

    def _fresh(self) -> tuple["ConnectionPool[psycopg.Connection]", int]:
        pool, generation = self._current()
        now = time.monotonic()
        if self._resolve is not None and now - self._resolved_at >= _RESOLVE_EVERY:
            self._resolved_at = now
            conninfo = self._resolve()
            if conninfo != self.conninfo:
                pool = self._rebuild(generation, conninfo)
                generation += 1
        return pool, generation

    def run(self, work: Callable[[psycopg.Connection], T]) -> T:
        """Run `work` on a pooled connection; once more on a new pool if the server went away.

        Raises:
            psycopg.errors.QueryCanceled: a statement ran past the statement timeout, or the
                call was interrupted (`Interrupted`); never retried.
            psycopg_pool.PoolTimeout: no connection came free in time while the server was
                there (a busy pool is not a lost server: nothing is rebuilt).
        """
        pool, generation = self._fresh()
        try:
            return self._attempt(pool, work)
        except (errors.QueryCanceled, PoolTimeout):
            raise
        except psycopg.OperationalError as exc:
            logger.warning("search connection lost (%s); reconnecting", _first_line(exc))
            return self._attempt(self._recover(generation), work)

    def _attempt(
        self, pool: "ConnectionPool[psycopg.Connection]", work: Callable[[psycopg.Connection], T]
    ) -> T:
        interrupt = _current.get()
        if interrupt is not None and interrupt.cancelled:
            raise Interrupted("the request was cancelled")
        conn = self._checkout(pool)
        try:
            if interrupt is None:
                return work(conn)
            with interrupt._running(conn):  # pyright: ignore[reportPrivateUsage]  # same module
                return work(conn)
        finally:
            pool.putconn(conn)

    def _checkout(self, pool: "ConnectionPool[psycopg.Connection]") -> psycopg.Connection:
        """A connection within the pool's timeout; `_ServerGone` as soon as a wait turns out
        to be for a server that refuses connections (the pool would retry for the whole
        timeout), while waiting behind busy connections goes on."""
        deadline = time.monotonic() + self.settings.timeout
        failures = _connection_errors(pool)
        while True:
            remaining = deadline - time.monotonic()
            try:
                return pool.getconn(timeout=max(0.01, min(_PROBE_SECONDS, remaining)))
            except PoolTimeout:
                if remaining <= _PROBE_SECONDS:
                    raise
                # The pool tried to open a connection meanwhile and could not: the server is
                # gone (a slow machine only makes the wait longer, it adds no error).
                if _connection_errors(pool) > failures:
                    raise _ServerGone("the database server does not accept connections") from None

    def _recover(self, seen: int) -> "ConnectionPool[psycopg.Connection]":
        """A new pool once the server is back (restarted by `resolve` when it can be)."""
        with self._recover_lock:
            pool, generation = self._current()
            if generation != seen:
                return pool  # another thread reconnected meanwhile
            deadline = time.monotonic() + _RECOVER_SECONDS
            conninfo = self.conninfo
            while True:
                try:
                    conninfo = self._resolve() if self._resolve is not None else conninfo
                    if _accepts(conninfo):
                        break
                except Exception as exc:  # a start that failed; tried again until the deadline
                    if time.monotonic() > deadline:
                        raise
                    logger.info("the database server is not back yet: %s", _first_line(exc))
                if time.monotonic() > deadline:
                    break  # the retry on the new pool says why
                # A killed postmaster is a zombie until reaped: not yet seen as stopped.
                time.sleep(0.25)
            return self._rebuild(seen, conninfo)

    def close(self) -> None:
        """Close the pool (a later call would fail)."""
        with self._lock:
            pool = self._pool
        pool.close()


def _close_later(pool: "ConnectionPool[psycopg.Connection]") -> None:
    time.sleep(_CLOSE_OLD_POOL_AFTER)
    pool.close(timeout=0)


class _ServerGone(psycopg.OperationalError):
    """A checkout waited for a server that does not accept connections."""


def _connection_errors(pool: "ConnectionPool[psycopg.Connection]") -> int:
    return pool.get_stats().get("connections_errors", 0)


def _accepts(conninfo: str) -> bool:
    try:
        psycopg.connect(conninfo, connect_timeout=2).close()
    except psycopg.Error:
        return False
    return True


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_pools: dict[tuple[str, PoolSettings], SearchPool] = {}
_lock = threading.Lock()


def pool_settings(settings: Settings) -> PoolSettings:
    """The pool configuration of `settings` (RAG_SEARCH_POOL_*, _EF_SEARCH, _STATEMENT_*)."""
    return PoolSettings(
        size=settings.search_pool_size,
        timeout=settings.search_pool_timeout,
        ef_search=settings.search_ef_search,
        statement_timeout_ms=settings.search_statement_timeout_ms,
    )


def get_pool(
    conninfo: str, settings: PoolSettings, resolve: Callable[[], str] | None = None
) -> SearchPool:
    """The process's pool for `conninfo` (opened on first use).

    `resolve` gives the database's URL again (e.g. `ready_conninfo`, which restarts a stopped
    embedded server); without it the pool reconnects to `conninfo` only.
    """
    key = (conninfo, settings)
    with _lock:
        pool = _pools.get(key)
        if pool is None:
            pool = SearchPool(conninfo, settings, resolve, name=f"rag-search-{len(_pools)}")
            _pools[key] = pool
        return pool


def search_pool(settings: Settings, conninfo: str | None = None) -> SearchPool:
    """The process's pool for the configured database (or `conninfo`), which restarts the
    embedded server when it stopped (`ready_conninfo`) and reconnects after a crash."""
    from rag_pipeline.store.runtime import ready_conninfo

    if conninfo is not None:
        return get_pool(conninfo, pool_settings(settings))
    return get_pool(
        ready_conninfo(settings), pool_settings(settings), lambda: ready_conninfo(settings)
    )


def without_timeout(work: Callable[[psycopg.Connection], T]) -> Callable[[psycopg.Connection], T]:
    """`work` run with no statement timeout: for maintenance the search itself asks for (the
    BM25 statistics' rebuild grows with the index), never for a statement a caller shapes."""

    def unbounded(conn: psycopg.Connection) -> T:
        # RESET would go back to the server's default, not to the pool's setting.
        row = conn.execute("SHOW statement_timeout").fetchone()
        conn.execute("SET statement_timeout = 0")
        try:
            return work(conn)
        finally:
            if row is not None:
                conn.execute(sql.SQL("SET statement_timeout = {}").format(sql.Literal(row[0])))

    return unbounded


def close_pools(conninfo: str | None = None) -> None:
    """Close this process's pools (of one database, or all), e.g. before dropping it."""
    with _lock:
        keys = [key for key in _pools if conninfo is None or key[0] == conninfo]
        pools = [_pools.pop(key) for key in keys]
    for pool in pools:
        pool.close()
