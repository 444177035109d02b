"""The vector store on real PostgreSQL + pgvector: migrations, model binding, stage rows."""

import psycopg
import pytest

from rag_pipeline.core.incremental import StageOutput, StageRecord
from rag_pipeline.settings import Settings
from rag_pipeline.store import stages
from rag_pipeline.store.connection import connect
from rag_pipeline.store.migrations import (
    ModelMismatchError,
    available_migrations,
    ensure_model,
    migrate,
    schema_version,
    stored_model,
)


def test_migrations_are_numbered_and_idempotent(database_url: str) -> None:
    versions = [m.version for m in available_migrations()]
    assert versions == sorted(versions)
    assert versions[0] == 1
    with connect(database_url) as conn:
        assert schema_version(conn) == 0
        assert migrate(conn) == versions
        assert migrate(conn) == []
        assert schema_version(conn) == versions[-1]
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'rag'"
            )
        }
    assert {"documents", "sections", "chunks", "embedding_cache", "ingest_errors"} <= tables


def test_a_partly_migrated_database_upgrades(database_url: str) -> None:
    first, *rest = available_migrations()
    with connect(database_url) as conn:
        migrate(conn)
        # Pretend only the first migration had run: the next call applies the rest.
        conn.execute("DELETE FROM rag.schema_migrations WHERE version > %s", (first.version,))
        conn.commit()
        if rest:
            pytest.skip("later migrations would need their own downgrade to test")
        assert migrate(conn) == []


def test_model_binds_vector_dimension_and_hnsw_index(database_url: str) -> None:
    with connect(database_url) as conn:
        migrate(conn)
        ensure_model(conn, "model-a", 384, force=False)
        assert stored_model(conn) == ("model-a", 384)
        typ = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = 'rag.chunks'::regclass AND attname = 'embedding'"
        ).fetchone()
        assert typ == ("vector(384)",)
        index = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'chunks_embedding_hnsw'"
        ).fetchone()
        assert index is not None
        assert "hnsw" in index[0]
        assert "vector_cosine_ops" in index[0]
        # Same model again: nothing to do.
        ensure_model(conn, "model-a", 384, force=False)


def test_model_change_with_vectors_stored_is_an_error_unless_forced(database_url: str) -> None:
    with connect(database_url) as conn:
        migrate(conn)
        ensure_model(conn, "model-a", 3, force=False)
        conn.execute(
            "INSERT INTO rag.documents (id, source_type, partition_key, doc_key, source_id,"
            " language, title, original_format, source_version, content_hash, input_hash,"
            " sanitizer_version, chunker_fingerprint, model_id, body)"
            " VALUES ('d', 'files', 'p', 'k', 'k', 'en', 't', 'markdown', 'v', 'h', 'i', 's',"
            " 'c', 'model-a', 'b')"
        )
        conn.execute("INSERT INTO rag.sections VALUES ('s', 'd', 0, 't', '{}', 'b', 0, 1)")
        conn.execute(
            "INSERT INTO rag.chunks (id, document_id, section_id, source_type, language, ordinal,"
            " heading, text, embedded_text, token_count, start_char, end_char, text_sha256,"
            " embedding) VALUES ('c', 'd', 's', 'files', 'en', 0, 't', 'b', 'b', 3, 0, 1, 'x',"
            " '[1,0,0]')"
        )
        conn.commit()
        with pytest.raises(ModelMismatchError, match="rag ingest --force"):
            ensure_model(conn, "model-b", 4, force=False)
        ensure_model(conn, "model-b", 4, force=True)
        assert stored_model(conn) == ("model-b", 4)
        assert conn.execute("SELECT count(*) FROM rag.documents").fetchone() == (0,)


def test_stage_rows_keep_nul_and_surrogates_exactly(database_url: str) -> None:
    body = "before\x00after \ud800 lone surrogate, tab\tand \\. backslash"
    record = StageRecord("doc.md", {"title": "NUL\x00in title"}, body)
    output = StageOutput("files", "p1", changed={"doc.md": ("in", record)})
    with connect(database_url) as conn:
        migrate(conn)
        stages.write_stage(conn, "files_raw", output, "run-1")
        conn.commit()
        (loaded,) = stages.load_records(conn, "files_raw", "p1", ["doc.md"])
    assert loaded.body == body
    assert loaded.meta["title"] == "NUL\ufffdin title"


def test_stage_partition_is_replaced_not_appended(database_url: str, rag_env: Settings) -> None:
    def output(partition: str, keys: list[str], kept: set[str] | None = None) -> StageOutput:
        return StageOutput(
            "files",
            partition,
            changed={k: ("i", StageRecord(k, {}, f"text of {k}")) for k in keys},
            kept=kept or set(),
        )

    with connect(database_url) as conn:
        migrate(conn)
        stages.write_stage(conn, "files_raw", output("A", ["a1", "a2"]), "r1")
        stages.write_stage(conn, "files_raw", output("B", ["b1"]), "r2")
        stages.write_stage(conn, "files_raw", output("A", ["a3"], kept={"a2"}), "r3")
        conn.commit()
        rows = conn.execute(
            "SELECT partition_key, doc_key FROM rag.stage_documents ORDER BY 1, 2"
        ).fetchall()
    assert rows == [("A", "a2"), ("A", "a3"), ("B", "b1")]


def test_unique_document_key_per_partition(database_url: str) -> None:
    with connect(database_url) as conn:
        migrate(conn)
        insert = (
            "INSERT INTO rag.documents (id, source_type, partition_key, doc_key, source_id,"
            " language, title, original_format, source_version, content_hash, input_hash,"
            " sanitizer_version, chunker_fingerprint, model_id, body)"
            " VALUES (%s, 'files', 'p', 'k', 'k', 'en', 't', 'markdown', 'v', 'h', 'i', 's',"
            " 'c', 'm', 'b')"
        )
        conn.execute(insert, ("id1",))
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(insert, ("id2",))
