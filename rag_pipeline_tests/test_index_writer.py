"""The index writer: partition A, then B, then A again holds B plus the new A; and the pgvector
IO manager, which reports what the writer wrote."""

import json

import dagster as dg
import numpy as np
import pytest
from psycopg.types.json import Jsonb

from rag_pipeline.core.embedding import text_sha256
from rag_pipeline.core.models import Chunk, Section, SourceFormat
from rag_pipeline.core.records import ChunkedRecord, DocumentInfo
from rag_pipeline.io_managers.pgvector import IndexOutput, PgVectorIOManager
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.settings import Settings
from rag_pipeline.store import history, stages
from rag_pipeline.store.connection import connect
from rag_pipeline.store.index_writer import IndexWrite, partition_writer
from rag_pipeline.store.indexing import indexed_document
from rag_pipeline.store.migrations import ensure_model

DIM = 384


def _record(key: str, text: str) -> ChunkedRecord:
    info = DocumentInfo("files", key, "en_US", f"Title {key}", SourceFormat.MARKDOWN, "v1")
    section = Section(0, f"Title {key}", (f"Title {key}",), text, 0, len(text))
    chunk = Chunk(0, 0, text, text, 5, 0, len(text))
    return ChunkedRecord(key, info, text, "s", "c", (section,), (chunk,))


def _vector(text: str, dim: int = DIM) -> np.ndarray:
    vector = np.zeros(dim, dtype=np.float32)
    vector[sum(map(ord, text)) % dim] = 1.0
    return vector


def _write(
    vectordb: VectorDBResource,
    partition: str,
    docs: dict[str, str],
    members: list[str],
    *,
    dim: int = DIM,
) -> IndexWrite:
    """Run partition `partition` listing `members`, of which `docs` changed."""
    with connect(vectordb.conninfo()) as conn:
        stages.set_partition_members(conn, "files", partition, members)
        conn.commit()
        documents = (
            indexed_document(
                key, _record(key, text), f"i-{text}", "m", {text_sha256(text): _vector(text, dim)}
            )
            for key, text in docs.items()
        )
        with partition_writer(conn, "files", partition, f"run-{partition}") as writer:
            writer.write(documents)
            return writer.finish(
                ready=list(docs), failed=[], computed=[], stats={"x": 1}, keep_versions=3
            )


def _report(
    vectordb: VectorDBResource, partition: str, written: IndexWrite, *, into: str | None = None
) -> dg.OutputContext:
    """Hand the IO manager what the writer wrote for `partition` (as the materialization of
    partition `into`, the same by default)."""
    context = dg.build_output_context(
        asset_key=dg.AssetKey(["files", "embeddings"]),
        partition_key=into or partition,
        asset_partitions_def=dg.StaticPartitionsDefinition(["A", "B"]),
        run_id=f"run-{partition}",
    )
    PgVectorIOManager(vectordb=vectordb).handle_output(
        context, IndexOutput("files", partition, written)
    )
    return context


def _rows(database_url: str) -> list[tuple[str, str, str]]:
    with connect(database_url) as conn:
        return [
            (r[0], r[1], r[2])
            for r in conn.execute(
                "SELECT m.partition_key, d.doc_key, c.text FROM rag.documents d"
                " JOIN rag.chunks c ON c.document_id = d.id"
                " JOIN rag.document_partitions m ON m.doc_key = d.doc_key ORDER BY 1, 2, 3"
            )
        ]


@pytest.fixture
def vectordb(rag_env: Settings, database_url: str) -> VectorDBResource:
    resource = VectorDBResource(url=database_url, home=str(rag_env.home))
    with connect(resource.conninfo()) as conn:
        ensure_model(conn, "m", DIM, force=False)
    return resource


def test_partition_a_b_a_holds_b_plus_new_a(vectordb: VectorDBResource, database_url: str) -> None:
    _write(vectordb, "A", {"a1": "first", "a2": "second"}, ["a1", "a2"])
    _write(vectordb, "B", {"b1": "bee"}, ["b1"])
    # A again: a1 changed, a2 gone, a3 new.
    written = _write(vectordb, "A", {"a1": "first v2", "a3": "third"}, ["a1", "a3"])
    assert _rows(database_url) == [
        ("A", "a1", "first v2"),
        ("A", "a3", "third"),
        ("B", "b1", "bee"),
    ]
    assert (written.documents_written, written.chunks_written) == (2, 2)
    assert written.documents_deleted == 1
    assert dict(written.counts) == {"documents": 2, "sections": 2, "chunks": 2}
    assert sorted((c.change, c.source_id) for c in written.changes) == [
        ("added", "a3"),
        ("changed", "a1"),
        ("deleted", "a2"),
    ]
    with connect(database_url) as conn:
        run = conn.execute(
            "SELECT stats FROM rag.ingest_runs WHERE run_id = 'run-A' AND partition_key = 'A'"
        ).fetchone()
    assert run is not None
    assert run[0] == {"x": 1, "documents_deleted": 1}

    # A once more with a1 unchanged (listed, not re-sent): nothing duplicated or lost.
    _write(vectordb, "A", {"a3": "third"}, ["a1", "a3"])
    assert _rows(database_url) == [
        ("A", "a1", "first v2"),
        ("A", "a3", "third"),
        ("B", "b1", "bee"),
    ]
    with connect(database_url) as conn:
        sections = conn.execute("SELECT count(*) FROM rag.sections").fetchone()
        tsv = conn.execute("SELECT tsv::text FROM rag.chunks WHERE text = 'third'").fetchone()
    assert sections == (3,)
    assert tsv is not None
    assert "'third':" in tsv[0]


def test_a_document_listed_by_two_partitions_is_stored_once(
    vectordb: VectorDBResource, database_url: str
) -> None:
    _write(vectordb, "A", {"shared": "both"}, ["shared"])
    _write(vectordb, "B", {"shared": "both"}, ["shared"])
    assert _rows(database_url) == [("A", "shared", "both"), ("B", "shared", "both")]
    with connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM rag.documents").fetchone() == (1,)
    # Leaving A keeps it (B lists it); leaving B too deletes it.
    _write(vectordb, "A", {}, [])
    assert _rows(database_url) == [("B", "shared", "both")]
    _write(vectordb, "B", {}, [])
    assert _rows(database_url) == []


def test_failed_write_leaves_partition_untouched(
    vectordb: VectorDBResource, database_url: str
) -> None:
    _write(vectordb, "A", {"a1": "first"}, ["a1"])
    # A vector of the wrong dimension makes COPY fail half-way through the transaction.
    with pytest.raises(Exception, match=r"dimension|expected"):
        _write(vectordb, "A", {"a1": "first v2", "a2": "second"}, ["a1", "a2"], dim=3)
    assert [(r[1], r[2]) for r in _rows(database_url)] == [("a1", "first")]
    with connect(database_url) as conn:
        versions = conn.execute("SELECT count(*) FROM rag.document_versions").fetchone()
    assert versions == (1,)


def test_finish_before_write_is_refused(vectordb: VectorDBResource) -> None:
    with (
        connect(vectordb.conninfo()) as conn,
        pytest.raises(RuntimeError, match="before write"),
        partition_writer(conn, "files", "A", "run") as writer,
    ):
        writer.finish(ready=["a1"], failed=[], computed=[], stats={}, keep_versions=3)


def test_io_manager_reports_the_write_as_metadata(vectordb: VectorDBResource) -> None:
    _write(vectordb, "A", {"a1": "first", "a2": "second"}, ["a1", "a2"])
    written = _write(vectordb, "A", {"a3": "third"}, ["a1", "a3"])
    metadata = _report(vectordb, "A", written).get_logged_metadata()
    assert metadata["dagster/partition_row_count"].value == 2  # type: ignore[union-attr]
    assert metadata["documents_deleted"].value == 1  # type: ignore[union-attr]
    assert metadata["documents_in_partition"].value == 2  # type: ignore[union-attr]
    table = metadata["documents"].value  # type: ignore[union-attr]
    assert sorted((r.data["change"], r.data["source_id"]) for r in table.records) == [  # type: ignore[union-attr]
        ("added", "a3"),
        ("deleted", "a2"),
    ]
    # An output handed to another partition's materialization is refused.
    with pytest.raises(dg.DagsterInvariantViolationError, match="partition"):
        _report(vectordb, "A", written, into="B")


def test_computed_flags_of_a_large_run_are_a_hash_lookup(
    vectordb: VectorDBResource, database_url: str
) -> None:
    # A first ingest of 100,000 documents embeds ~200,000 texts. The history's flag of each
    # chunk must stay one hash lookup: a plan that scans the list per chunk took 10+ minutes.
    computed = [text_sha256(f"elsewhere {n}") for n in range(60_000)] + [text_sha256("first")]
    with connect(vectordb.conninfo()) as conn:
        stages.set_partition_members(conn, "files", "A", ["a1", "a2"])
        documents = [
            indexed_document(
                key, _record(key, text), f"i-{text}", "m", {text_sha256(text): _vector(text)}
            )
            for key, text in (("a1", "first"), ("a2", "second"))
        ]
        with partition_writer(conn, "files", "A", "run-A") as writer:
            writer.write(documents)
            params = {
                "run_id": "run-A",
                "source": "files",
                "keys": ["a1", "a2"],
                "computed": computed,
                "code_versions": Jsonb({}),
                "assets": [],
                "stages": Jsonb({}),
                "embeddings": "e",
            }
            (plan,) = conn.execute(
                "EXPLAIN (FORMAT JSON) " + history._INSERT_NEW, params, prepare=False
            ).fetchone()
            writer.finish(
                ready=["a1", "a2"], failed=[], computed=computed, stats={}, keep_versions=3
            )
        flags = conn.execute(
            "SELECT doc_key, chunks -> 0 ->> 'computed' FROM rag.document_versions ORDER BY 1"
        ).fetchall()
    assert flags == [("a1", "true"), ("a2", "false")]
    assert "unnest" not in json.dumps(plan)
    assert '"Node Type": "ProjectSet"' not in json.dumps(plan)
