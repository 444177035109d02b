"""The vector store on real PostgreSQL + pgvector: migrations, model binding, stage rows."""

from importlib import resources

import psycopg
import pytest

from rag_pipeline.core.models import SourceFormat
from rag_pipeline.core.records import DocumentInfo, RawRecord
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
from rag_pipeline.store.schema_objects import migrate_stepwise

_CHUNK_COLUMNS = (
    "id, document_id, section_id, source_type, language, ordinal, heading, text, embedded_text,"
    " token_count, start_char, end_char, text_sha256"
)


def _document_and_section(conn: psycopg.Connection) -> None:
    """Document 'd' (model-a) with section 's', for chunks to point at."""
    conn.execute(
        "INSERT INTO rag.documents (id, source_type, doc_key, source_id,"
        " language, title, original_format, source_version, content_hash, input_hash,"
        " sanitizer_version, chunker_fingerprint, model_id, body)"
        " VALUES ('d', 'files', 'k', 'k', 'en', 't', 'markdown', 'v', 'h', 'i', 's',"
        " 'c', 'model-a', 'b')"
    )
    conn.execute("INSERT INTO rag.sections VALUES ('s', 'd', 0, 't', '{}', 'b', 0, 1)")


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


def test_a_database_of_the_first_release_upgrades_to_partition_free_identity(
    database_url: str,
) -> None:
    first = available_migrations()[0]
    old_row = (
        "INSERT INTO rag.documents (id, source_type, partition_key, doc_key, source_id,"
        " language, title, original_format, source_version, content_hash, input_hash,"
        " sanitizer_version, chunker_fingerprint, model_id, body)"
        " VALUES (%s, 'files', %s, %s, %s, 'en_US', 't', 'markdown', 'v', 'h', 'i', 's',"
        " 'c', 'm', 'b')"
    )
    with connect(database_url) as conn:
        # The schema as the first release left it, with a file indexed through two folders.
        conn.execute("CREATE SCHEMA rag")
        conn.execute(
            "CREATE TABLE rag.schema_migrations (version integer PRIMARY KEY,"
            " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(first.sql.encode())
        conn.execute("INSERT INTO rag.schema_migrations VALUES (1, %s)", (first.name,))
        conn.execute(old_row, ("id1", "/docs", "sub/a.md", "sub/a.md"))
        conn.execute(old_row, ("id2", "/docs/sub", "a.md", "a.md"))
        conn.execute(old_row, ("id3", "demo", "b.md", "b.md"))
        conn.commit()
        applied = migrate(conn)
        documents = conn.execute(
            "SELECT doc_key, source_id FROM rag.documents ORDER BY 1"
        ).fetchall()
        members = conn.execute(
            "SELECT doc_key, partition_key FROM rag.document_partitions ORDER BY 1, 2"
        ).fetchall()
    assert applied[0] == 2
    # m002 made the file one document named by its path; m009 names folders, so the document
    # is named by the longest folder ("sub") and the other folder's listing by its own name.
    assert documents == [("demo/b.md", "demo/b.md"), ("sub/a.md", "sub/a.md")]
    assert members == [
        ("demo/b.md", "demo"),
        ("docs/sub/a.md", "docs"),
        ("sub/a.md", "sub"),
    ]


def test_an_index_of_release_three_is_reread_with_split_and_folded_words(database_url: str) -> None:
    with connect(database_url) as conn:
        conn.execute("CREATE SCHEMA rag")
        conn.execute(
            "CREATE TABLE rag.schema_migrations (version integer PRIMARY KEY,"
            " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for migration in available_migrations()[:3]:
            conn.execute(migration.sql.encode())
            conn.execute(
                "INSERT INTO rag.schema_migrations VALUES (%s, %s)",
                (migration.version, migration.name),
            )
        ensure_model(conn, "model-a", 3, force=False)
        _document_and_section(conn)
        conn.execute(
            f"INSERT INTO rag.chunks ({_CHUNK_COLUMNS}, embedding, ts_config)"
            " VALUES ('c', 'd', 's', 'files', 'en', 0,"
            " 'Bank/Cash Statement', 'Ship/Receipt confirm', 'b', 3, 0, 1, 'x', '[1,0,0]',"
            " 'english'), ('c2', 'd', 's', 'files', 'es', 1, 'Facturación', 'del año', 'b', 3,"
            " 0, 1, 'y', '[0,1,0]', 'spanish')"
        )
        conn.execute("SELECT rag.refresh_term_stats()")
        conn.commit()
        before = conn.execute("SELECT tsv::text FROM rag.chunks WHERE id = 'c'").fetchone()
        generation = conn.execute("SELECT generation FROM rag.search_stats").fetchone()
        applied = migrate(conn)
        after = conn.execute("SELECT tsv::text FROM rag.chunks WHERE id = 'c'").fetchone()
        folded = conn.execute("SELECT tsv::text FROM rag.chunks WHERE id = 'c2'").fetchone()
        moved = conn.execute("SELECT last_value FROM rag.chunks_generation").fetchone()
        found = conn.execute(
            "SELECT count(*) FROM rag.chunks WHERE tsv @@ to_tsquery('english', 'cash & receipt')"
        ).fetchone()
    assert applied == [m.version for m in available_migrations()[3:]]
    assert before is not None
    assert "'bank/cash'" in before[0]
    assert after == ("'bank':1A 'cash':2A 'confirm':6B 'receipt':5B 'ship':4B 'statement':3A",)
    assert found == (1,)
    # Words with diacritics are indexed both ways (the stem, and the word without them).
    assert folded == ("'ano':5B 'año':3B 'factur':1A 'facturacion':4A",)
    # The statistics were built from the old lexemes: the generation moved, so they rebuild.
    assert generation is not None
    assert moved is not None
    assert moved[0] > generation[0]


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
        _document_and_section(conn)
        conn.execute(
            f"INSERT INTO rag.chunks ({_CHUNK_COLUMNS}, embedding)"
            " VALUES ('c', 'd', 's', 'files', 'en', 0, 't', 'b', 'b', 3, 0, 1, 'x',"
            " '[1,0,0]')"
        )
        conn.commit()
        with pytest.raises(ModelMismatchError, match="rag ingest --force"):
            ensure_model(conn, "model-b", 4, force=False)
        ensure_model(conn, "model-b", 4, force=True)
        assert stored_model(conn) == ("model-b", 4)
        assert conn.execute("SELECT count(*) FROM rag.documents").fetchone() == (0,)


def _raw(key: str, body: str, title: str = "t") -> RawRecord:
    info = DocumentInfo("files", key, "", title, SourceFormat.MARKDOWN, "v1")
    return RawRecord(key, info, body)


def test_stage_rows_keep_nul_and_surrogates_exactly(database_url: str) -> None:
    body = "before\x00after \ud800 lone surrogate, tab\tand \\. backslash"
    with connect(database_url) as conn:
        migrate(conn)
        stages.upsert_records(
            conn, "files/raw", [("doc.md", "in", _raw("doc.md", body, "NUL\x00in title"))], "run-1"
        )
        conn.commit()
        ((key, loaded),) = stages.load_records(conn, "files/raw", RawRecord, ["doc.md"])
    assert key == "doc.md"
    assert loaded.body == body
    assert loaded.info.title == "NUL\ufffdin title"


def test_partition_membership_decides_what_is_orphaned(database_url: str) -> None:
    with connect(database_url) as conn:
        migrate(conn)
        rows = [(k, "i", _raw(k, f"text of {k}")) for k in ("a1", "a2", "shared", "b1")]
        stages.upsert_records(conn, "files/raw", rows, "r1")
        assert stages.set_partition_members(conn, "files", "A", ["a1", "a2", "shared"]) == 0
        assert stages.set_partition_members(conn, "files", "B", ["b1", "shared"]) == 0
        # A drops a2 (listed nowhere else: an orphan) and shared (B still lists it).
        assert stages.set_partition_members(conn, "files", "A", ["a1"]) == 1
        assert stages.delete_orphans(conn, "files/raw", "files") == 1
        assert stages.partition_members(conn, "files", "A") == {"a1"}
        assert stages.partition_members(conn, "files", "B") == {"b1", "shared"}
        in_b, _ = stages.partition_hashes(conn, "files/raw", "files", "B")
        stored = conn.execute("SELECT doc_key FROM rag.stage_documents ORDER BY 1").fetchall()
    assert set(in_b) == {"b1", "shared"}
    assert [r[0] for r in stored] == ["a1", "b1", "shared"]


def test_unique_document_key_per_source(database_url: str) -> None:
    with connect(database_url) as conn:
        migrate(conn)
        insert = (
            "INSERT INTO rag.documents (id, source_type, doc_key, source_id,"
            " language, title, original_format, source_version, content_hash, input_hash,"
            " sanitizer_version, chunker_fingerprint, model_id, body)"
            " VALUES (%s, 'files', 'k', 'k', 'en', 't', 'markdown', 'v', 'h', 'i', 's',"
            " 'c', 'm', 'b')"
        )
        conn.execute(insert, ("id1",))
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(insert, ("id2",))


def test_folded_text_removes_every_diacritic_and_keeps_the_rest(database_url: str) -> None:
    with connect(database_url) as conn:
        migrate(conn)
        row = conn.execute(
            "SELECT rag.folded_text('Facturación Electrónica: año, Ñandú, Bank/Cash_ID 2')"
        ).fetchone()
    assert row == ("Facturacion Electronica: ano, Nandu, Bank/Cash_ID 2",)


@pytest.mark.parametrize("text", ["Bank/Cash Statement", "", "Año – Ångström ǅ", "€ 2 ½"])
def test_folded_text_gives_what_its_first_version_gave(database_url: str, text: str) -> None:
    # m008 returns a one-byte-per-character text without scanning m005's letters.
    with connect(database_url) as conn:
        migrate(conn)
        m005 = resources.files("rag_pipeline.store.migrations") / "m005_folded_text.sql"
        body = m005.read_text(encoding="utf-8").split("AS $$", 1)[1].split("$$", 1)[0]
        first = body.strip().removeprefix("SELECT ").replace("body", "%(text)s::text", 1)
        row = conn.execute(
            f"SELECT rag.folded_text(%(text)s), {first}".encode(), {"text": text}
        ).fetchone()
    assert row is not None
    assert row[0] == row[1]


def test_stage_rows_of_flat_keys_are_renamed_to_the_prefixed_keys(database_url: str) -> None:
    m012 = next(m for m in available_migrations() if m.version == 12)
    with connect(database_url) as conn:
        migrate_stepwise(conn, 11)
        for asset in ("files_raw", "k_entry_chunks", "ad_metadata_sanitized", "wiki_markdown"):
            stages.upsert_records(
                conn, asset, [("doc.md", "in", _raw("doc.md", "body", "t"))], "run-1"
            )
        conn.commit()
        assert migrate(conn) == [m.version for m in available_migrations() if m.version >= 12]
        # Applied again (a restore of a dump): nothing changes.
        conn.execute(m012.sql.encode())
        names = [r[0] for r in conn.execute("SELECT asset_key FROM rag.stage_documents")]
        ((key, loaded),) = stages.load_records(conn, "k_entry/chunks", RawRecord, ["doc.md"])
    assert sorted(names) == [
        "ad_metadata/sanitized",
        "files/raw",
        "k_entry/chunks",
        "wiki/markdown",
    ]
    assert (key, loaded.body) == ("doc.md", "body")
