"""The pgvector IO manager: partition A, then B, then A again holds B plus the new A."""

import dagster as dg
import numpy as np
import pytest

from rag_pipeline.core.embedding import text_sha256
from rag_pipeline.core.models import Chunk, Section, SourceFormat
from rag_pipeline.core.records import ChunkedRecord, DocumentInfo
from rag_pipeline.io_managers.pgvector import IndexOutput, PgVectorIOManager
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.settings import Settings
from rag_pipeline.store import stages
from rag_pipeline.store.cache import store_vectors
from rag_pipeline.store.connection import connect
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
    vectordb: VectorDBResource, partition: str, docs: dict[str, str], members: list[str]
) -> dg.OutputContext:
    """Run partition `partition` listing `members`, of which `docs` changed."""
    with connect(vectordb.conninfo()) as conn:
        rows = [(key, f"i-{text}", _record(key, text)) for key, text in docs.items()]
        stages.upsert_records(conn, "files/chunks", rows, "run")
        stages.set_partition_members(conn, "files", partition, members)
        store_vectors(conn, "m", [(text_sha256(t), _vector(t)) for t in docs.values()])
        conn.commit()
    context = dg.build_output_context(
        asset_key=dg.AssetKey(["files", "embeddings"]),
        partition_key=partition,
        asset_partitions_def=dg.StaticPartitionsDefinition(["A", "B"]),
        run_id=f"run-{partition}",
    )
    PgVectorIOManager(vectordb=vectordb).handle_output(
        context,
        IndexOutput(
            "files",
            partition,
            chunks_asset="files/chunks",
            model_id="m",
            ready={key: f"i-{text}" for key, text in docs.items()},
            stats={"x": 1},
        ),
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
    context = _write(vectordb, "A", {"a1": "first v2", "a3": "third"}, ["a1", "a3"])
    assert _rows(database_url) == [
        ("A", "a1", "first v2"),
        ("A", "a3", "third"),
        ("B", "b1", "bee"),
    ]
    metadata = context.get_logged_metadata()
    assert metadata["dagster/partition_row_count"].value == 2  # type: ignore[union-attr]
    assert metadata["documents_deleted"].value == 1  # type: ignore[union-attr]

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
    with connect(vectordb.conninfo()) as conn:
        store_vectors(conn, "m", [(text_sha256("second"), _vector("second", 3))])
        conn.commit()
    with pytest.raises(Exception, match=r"dimension|expected"):
        _write(vectordb, "A", {"a1": "first v2", "a2": "second"}, ["a1", "a2"])
    assert [(r[1], r[2]) for r in _rows(database_url)] == [("a1", "first")]
