"""The bundled demo corpus ingested once into its own database, for the `ask` and MCP tests."""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import psycopg
import pytest
from psycopg import sql

from rag_pipeline_tests.pipeline_helpers import ingest


@contextmanager
def demo_index(
    pg_admin_uri: str, rag_home: Path, *, wiki: bool = False
) -> Iterator[dict[str, str]]:
    """A fresh database holding the ingested demo corpus (and, with `wiki`, the bundled demo
    wiki export); yields the environment that uses it."""
    name = f"test_demo_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_uri, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = pg_admin_uri.replace("/postgres?", f"/{name}?")
    env = {"RAG_HOME": str(rag_home), "RAG_VECTORDB_URL": url}
    try:
        with pytest.MonkeyPatch.context() as patch, dg.instance_for_test() as instance:
            for variable, value in env.items():
                patch.setenv(variable, value)
            patch.delenv("RAG_EMBEDDING_MODEL", raising=False)
            patch.delenv("RAG_EMBEDDING_MODEL_PATH", raising=False)
            patch.delenv("RAG_WIKI_API_URL", raising=False)
            ingest("demo", instance)
            if wiki:
                _ingest_demo_wiki(instance)
        yield env
    finally:
        with psycopg.connect(pg_admin_uri, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _ingest_demo_wiki(instance: dg.DagsterInstance) -> None:
    """The wiki job over the bundled export (RAG_WIKI_API_URL unset: offline)."""
    from rag_pipeline.definitions import defs

    key = "export:demo"
    if not instance.has_dynamic_partition("wiki_partitions", key):
        instance.add_dynamic_partitions("wiki_partitions", [key])
    job = defs().resolve_job_def("wiki_ingest_job")
    assert job.execute_in_process(instance=instance, partition_key=key).success
