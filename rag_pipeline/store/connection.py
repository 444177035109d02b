"""Connections to the vector database with pgvector types registered."""

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from pgvector.psycopg import register_vector


@contextmanager
def connect(conninfo: str, *, autocommit: bool = False) -> Iterator[psycopg.Connection]:
    """Open a connection with the `vector` type registered (after migrations created it)."""
    with psycopg.connect(conninfo, autocommit=autocommit) as conn:
        try:
            register_vector(conn)
        except psycopg.ProgrammingError:
            # The extension does not exist yet: only migrations run on such a connection.
            conn.rollback()
        yield conn
