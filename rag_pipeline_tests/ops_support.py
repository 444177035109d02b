"""Ingesting everything the way CI does (`rag ingest --source all` in a subprocess), for tests.

One in-process ingest per test session, shared by the end-to-end test and the Celery test
(which compares its index with this one): it embeds every demo corpus, the costliest thing
these tests do.
"""

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

# The Application Dictionary demo is the biggest corpus (1,100 documents); its tables alone
# exercise the source, so the runs configure it like a user would.
AD_ENTITY_TYPES = "table"


@dataclass(frozen=True)
class IngestAllRun:
    """A finished `rag ingest --source all`: where it wrote, what it printed."""

    database_url: str
    dagster_home: Path
    returncode: int
    output: str


def new_database(pg_admin_uri: str) -> str:
    """A new empty database on the session server; its URL."""
    name = f"test_ops_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_uri, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return pg_admin_uri.replace("/postgres?", f"/{name}?")


def drop_database(pg_admin_uri: str, url: str) -> None:
    """Drop a database made by `new_database`."""
    name = url.split("/")[-1].split("?")[0]
    with psycopg.connect(pg_admin_uri, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def ops_env(rag_home: Path, database_url: str, dagster_home: Path, **extra: str) -> dict[str, str]:
    """The environment of a `dagster`/`rag` subprocess on the test database."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("RAG_", "DAGSTER_", "IDEMPIERE_"))
    }
    env.update(
        RAG_HOME=str(rag_home),
        RAG_VECTORDB_URL=database_url,
        DAGSTER_HOME=str(dagster_home),
        **extra,
    )
    return env


def execute_ingest_all(
    rag_home: Path, database_url: str, work: Path, timeout: float = 1200, **extra: str
) -> IngestAllRun:
    """`rag ingest --source all` (the README's CI recipe) with a fresh DAGSTER_HOME."""
    dagster_home = work / "dagster_home"
    dagster_home.mkdir(parents=True)
    env = ops_env(
        rag_home, database_url, dagster_home, RAG_AD_ENTITY_TYPES=AD_ENTITY_TYPES, **extra
    )
    # The instance's dagster.yaml, as `rag` writes it (SQLite here).
    subprocess.run(
        [
            sys.executable,
            "-c",
            "from rag_pipeline.orchestration.instance import dagster_home as h;"
            "from rag_pipeline.settings import load_settings; h(load_settings())",
        ],
        env=env,
        check=True,
    )
    command = [sys.executable, "-m", "rag_pipeline.cli", "ingest", "--source", "all"]
    done = subprocess.run(
        command, env=env, cwd=work, capture_output=True, text=True, timeout=timeout, check=False
    )
    return IngestAllRun(database_url, dagster_home, done.returncode, done.stdout + done.stderr)


def index_snapshot(database_url: str) -> dict[str, list[tuple[object, ...]]]:
    """What a search sees: documents with their content hash, chunks with text and parent."""
    with psycopg.connect(database_url) as conn:
        documents = conn.execute(
            "SELECT source_type, source_id, language, content_hash"
            " FROM rag.documents ORDER BY 1, 2, 3"
        ).fetchall()
        chunks = conn.execute(
            "SELECT id, section_id, text_sha256 FROM rag.chunks ORDER BY id"
        ).fetchall()
    return {"documents": documents, "chunks": chunks}


def vectors(database_url: str) -> dict[str, list[float]]:
    """Every chunk's vector by chunk id."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT id, embedding::text FROM rag.chunks").fetchall()
    return {row[0]: [float(x) for x in row[1].strip("[]").split(",")] for row in rows}


@pytest.fixture(scope="session")
def ingest_all_in_process(
    rag_home: Path, pg_admin_uri: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[IngestAllRun]:
    """Every source ingested once in process by `rag ingest --source all`, on a fresh database."""
    url = new_database(pg_admin_uri)
    run = execute_ingest_all(rag_home, url, tmp_path_factory.mktemp("ingest_all"))
    yield run
    drop_database(pg_admin_uri, url)
