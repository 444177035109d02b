"""The pgvector IO manager: partition A, then B, then A again holds B plus the new A."""

import dagster as dg
import numpy as np

from rag_pipeline.io_managers.pgvector import IndexOutput, PgVectorIOManager
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.settings import Settings
from rag_pipeline.store.connection import connect
from rag_pipeline.store.index import ChunkRow, IndexedDocument, SectionRow
from rag_pipeline.store.migrations import ensure_model

DIM = 384


def _document(partition: str, key: str, text: str) -> IndexedDocument:
    doc_id = f"{partition}-{key}"
    vector = np.zeros(DIM, dtype=np.float32)
    vector[hash(text) % DIM] = 1.0
    return IndexedDocument(
        id=doc_id,
        source_type="files",
        partition_key=partition,
        doc_key=key,
        source_id=key,
        language="en_US",
        title=f"Title {key}",
        breadcrumb="",
        url="",
        original_format="markdown",
        source_version="v1",
        content_hash=f"h-{text}",
        input_hash=f"i-{text}",
        sanitizer_version="s",
        chunker_fingerprint="c",
        model_id="m",
        ts_config="english",
        metadata={"k": key},
        body=text,
        sections=[
            SectionRow(f"{doc_id}-s0", 0, f"Title {key}", [f"Title {key}"], text, 0, len(text))
        ],
        chunks=[
            ChunkRow(
                id=f"{doc_id}-c0-{text}",
                section_id=f"{doc_id}-s0",
                ordinal=0,
                heading=f"Title {key}",
                text=text,
                embedded_text=text,
                token_count=5,
                start_char=0,
                end_char=len(text),
                text_sha256=f"sha-{text}",
                embedding=vector,
            )
        ],
    )


def _write(manager: PgVectorIOManager, partition: str, docs: list[IndexedDocument], kept: set[str]):  # type: ignore[no-untyped-def]
    context = dg.build_output_context(
        asset_key=dg.AssetKey("files_embeddings"),
        partition_key=partition,
        asset_partitions_def=dg.StaticPartitionsDefinition(["A", "B"]),
        run_id=f"run-{partition}",
    )
    manager.handle_output(
        context, IndexOutput("files", partition, docs, kept_doc_keys=kept, stats={"x": 1})
    )
    return context


def _rows(database_url: str) -> list[tuple[str, str, str]]:
    with connect(database_url) as conn:
        return [
            (r[0], r[1], r[2])
            for r in conn.execute(
                "SELECT d.partition_key, d.doc_key, c.text FROM rag.documents d"
                " JOIN rag.chunks c ON c.document_id = d.id ORDER BY 1, 2, 3"
            )
        ]


def test_partition_a_b_a_holds_b_plus_new_a(rag_env: Settings, database_url: str) -> None:
    vectordb = VectorDBResource(url=database_url, home=str(rag_env.home))
    with connect(vectordb.conninfo()) as conn:
        ensure_model(conn, "m", DIM, force=False)
    manager = PgVectorIOManager(vectordb=vectordb)

    _write(manager, "A", [_document("A", "a1", "first"), _document("A", "a2", "second")], set())
    _write(manager, "B", [_document("B", "b1", "bee")], set())
    # A again: a1 changed, a2 gone, a3 new.
    context = _write(
        manager, "A", [_document("A", "a1", "first v2"), _document("A", "a3", "third")], set()
    )
    assert _rows(database_url) == [
        ("A", "a1", "first v2"),
        ("A", "a3", "third"),
        ("B", "b1", "bee"),
    ]
    metadata = context.get_logged_metadata()
    assert metadata["dagster/partition_row_count"].value == 2  # type: ignore[union-attr]

    # A once more with a1 declared unchanged (kept, not re-sent): nothing duplicated or lost.
    _write(manager, "A", [_document("A", "a3", "third")], {"a1"})
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


def test_failed_write_leaves_partition_untouched(rag_env: Settings, database_url: str) -> None:
    vectordb = VectorDBResource(url=database_url, home=str(rag_env.home))
    with connect(vectordb.conninfo()) as conn:
        ensure_model(conn, "m", DIM, force=False)
    manager = PgVectorIOManager(vectordb=vectordb)
    _write(manager, "A", [_document("A", "a1", "first")], set())
    broken = _document("A", "a2", "second")
    # A vector of the wrong dimension makes COPY fail half-way through the transaction.
    bad_chunk = broken.chunks[0].__class__(
        **{**broken.chunks[0].__dict__, "embedding": np.zeros(3, dtype=np.float32)}
    )
    broken = broken.__class__(**{**broken.__dict__, "chunks": [bad_chunk]})
    try:
        _write(manager, "A", [broken], set())
    except Exception:
        pass
    else:
        raise AssertionError("the write should have failed")
    assert _rows(database_url) == [("A", "a1", "first")]
