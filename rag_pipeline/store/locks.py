"""Advisory locks: one step per source, partition and stage at a time, across processes."""

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg


def lock_key(*parts: str) -> int:
    """A signed 64-bit advisory-lock key for the given names."""
    digest = hashlib.sha256("\0".join(("rag_pipeline", *parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextmanager
def advisory_lock(conn: psycopg.Connection, *parts: str, wait: bool = True) -> Iterator[bool]:
    """Hold a session-level advisory lock on `parts` for the block.

    With `wait=False` the block runs at once and receives False when another session holds
    the lock (nothing is locked then); with `wait=True` it waits and receives True.
    """
    key = lock_key(*parts)
    if wait:
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        acquired = True
    else:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        acquired = bool(row and row[0])
    if not conn.autocommit:
        conn.commit()
    try:
        yield acquired
    finally:
        if acquired and not conn.closed:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            if not conn.autocommit:
                conn.commit()
