"""A database holding the hand-made search corpus, shared by one test module."""

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import sql

from rag_pipeline.core.embedding import Embedder
from rag_pipeline.store.pool import close_pools
from rag_pipeline_tests.search_corpus import CORPUS
from rag_pipeline_tests.search_support import Doc, index_documents


@contextmanager
def indexed_database(pg_admin_uri: str, docs: Sequence[Doc], embedder: Embedder) -> Iterator[str]:
    """The URL of a new database with `docs` indexed, dropped afterwards."""
    name = f"search_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin_uri, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = pg_admin_uri.replace("/postgres?", f"/{name}?")
    try:
        index_documents(url, docs, embedder)
        yield url
    finally:
        close_pools(url)
        with psycopg.connect(pg_admin_uri, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture(scope="module")
def indexed_db(pg_admin_uri: str, embedder: Embedder) -> Iterator[str]:
    """The URL of a database with CORPUS indexed (read-only for the tests that use it)."""
    with indexed_database(pg_admin_uri, CORPUS, embedder) as url:
        yield url
