"""Issue 33: a folder is a named partition; moving it and re-pointing its name costs nothing."""

import shutil
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from rag_pipeline.cli import main
from rag_pipeline.settings import Settings
from rag_pipeline.store.migrations import available_migrations
from rag_pipeline_tests.pipeline_helpers import write

pytestmark = pytest.mark.integration


def _rag(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _docs(tmp_path: Path) -> Path:
    folder = tmp_path / "first-place" / "docs"
    write(folder, "guide.md", "# Guide\n\nHow to close a period.\n\n## Steps\n\nOpen it.\n")
    write(folder, "sub/notes.md", "# Notes\n\nWarehouse locators hold stock.\n")
    return folder


def test_a_moved_folder_re_pointed_re_ingests_nothing(
    rag_env: Settings, database_url: str, tmp_path: Path
) -> None:
    folder = _docs(tmp_path)
    first = _rag("ingest", "--path", str(folder))
    assert "registered" in first
    assert "'docs'" in first
    assert "files/docs: 2 new" in first
    with psycopg.connect(database_url) as conn:
        ids = sorted(r[0] for r in conn.execute("SELECT source_id FROM rag.documents"))
        before = sorted(r[0] for r in conn.execute("SELECT id FROM rag.chunks"))
    assert ids == ["docs/guide.md", "docs/sub/notes.md"]

    moved = tmp_path / "elsewhere" / "docs-moved"
    moved.parent.mkdir()
    shutil.move(folder, moved)
    assert "was " + str(folder) in _rag("folders", "add", "docs", str(moved))
    again = _rag("ingest", "--path", str(moved))
    assert "registered" not in again
    assert "0 new, 0 changed, 2 unchanged, 0 deleted, 0 failed documents" in again
    with psycopg.connect(database_url) as conn:
        after = sorted(r[0] for r in conn.execute("SELECT id FROM rag.chunks"))
        urls = [r[0] for r in conn.execute("SELECT url FROM rag.documents ORDER BY source_id")]
    assert after == before
    assert urls == [(moved / "guide.md").as_uri(), (moved / "sub" / "notes.md").as_uri()]


def test_folder_names_are_checked_and_listed(rag_env: Settings, tmp_path: Path) -> None:
    folder = _docs(tmp_path)
    assert _rag("folders", "add", "kb", str(folder)).startswith("kb\t")
    listed = _rag("folders", "list")
    assert f"kb\t{folder}" in listed
    bad = CliRunner().invoke(main, ["folders", "add", "../x", str(folder)])
    assert bad.exit_code == 1
    assert "cannot name a folder" in bad.output
    taken = CliRunner().invoke(main, ["folders", "add", "other", str(folder)])
    assert taken.exit_code == 1
    assert "already registered as 'kb'" in taken.output
    gone = CliRunner().invoke(main, ["folders", "add", "demo", str(folder)])
    assert gone.exit_code == 1


def test_an_unregistered_or_missing_folder_says_how_to_fix_it(
    rag_env: Settings, tmp_path: Path
) -> None:
    from rag_pipeline.operations.folders import folder_lookup
    from rag_pipeline.sources.files import FilesSource
    from rag_pipeline.store.folders import FolderError

    folder = _docs(tmp_path)
    _rag("folders", "add", "kb", str(folder))
    shutil.rmtree(folder)
    source = FilesSource(max_bytes=1000, folders=folder_lookup(rag_env))
    with pytest.raises(FolderError, match="re-point it with `rag folders add kb NEWPATH`"):
        list(source.list_documents("kb"))
    with pytest.raises(FolderError, match="no folder is registered as 'nope'"):
        list(source.list_documents("nope"))
    assert source.folder_for("demo").is_dir()


def test_the_migration_names_folders_kept_by_path(database_url: str, tmp_path: Path) -> None:
    # A database at schema 8 with a folder partition named by its absolute path.
    from rag_pipeline.core.ids import stable_id

    path = "/srv/old place/docs"
    source_id = f"{path}/guide.md"
    old_id = stable_id("files", source_id)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA rag")
        conn.execute(
            "CREATE TABLE rag.schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for migration in available_migrations():
            if migration.version < 9:
                conn.execute(migration.sql.encode())
                conn.execute(
                    "INSERT INTO rag.schema_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
        conn.execute(
            "INSERT INTO rag.documents (id, source_type, doc_key, source_id, language, title,"
            " original_format, source_version, content_hash, input_hash, sanitizer_version,"
            " chunker_fingerprint, model_id, body) VALUES (%s, 'files', %s, %s, '', 'Guide',"
            " 'markdown', '1:2', 'c', 'i', 's', 'f', 'm', 'text')",
            (old_id, source_id, source_id),
        )
        conn.execute(
            "INSERT INTO rag.sections (id, document_id, ordinal, title, heading_path, text,"
            " start_char, end_char) VALUES ('s-old', %s, 0, 'Guide', '{Guide}', 'text', 0, 4)",
            (old_id,),
        )
        conn.execute(
            "INSERT INTO rag.chunks (id, document_id, section_id, source_type, language, ordinal,"
            " heading, text, embedded_text, token_count, start_char, end_char, text_sha256,"
            " embedding) VALUES ('c-old', %s, 's-old', 'files', '', 0, 'Guide', 'text', 'text',"
            " 3, 0, 4, 'abc', '[1,2,3]')",
            (old_id,),
        )
        conn.execute(
            "INSERT INTO rag.document_partitions VALUES ('files', %s, %s)", (source_id, path)
        )
        nine = next(m for m in available_migrations() if m.version == 9)
        conn.execute(nine.sql.encode())
        docs = conn.execute("SELECT id, source_id, doc_key FROM rag.documents").fetchall()
        partitions = conn.execute("SELECT doc_key, partition_key FROM rag.document_partitions")
        named = conn.execute("SELECT name, path FROM rag.folders").fetchall()
        chunk = conn.execute("SELECT id, document_id, section_id FROM rag.chunks").fetchone()
        section = conn.execute("SELECT id FROM rag.sections").fetchone()
        assert partitions.fetchall() == [("docs/guide.md", "docs")]
    assert named == [("docs", path)]
    # Ids are the ones core/ids.py gives the new names: computed the same in SQL.
    new_id = stable_id("files", "docs/guide.md")
    assert docs == [(new_id, "docs/guide.md", "docs/guide.md")]
    from rag_pipeline.core.embedding import text_sha256

    section_id = stable_id(new_id, "section", 0, text_sha256("text"))
    assert section == (section_id,)
    assert chunk == (stable_id(new_id, "chunk", 0, "abc"), new_id, section_id)


def test_a_partition_kept_by_path_is_replaced_by_its_name(
    rag_env: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rag_pipeline.orchestration.instance import dagster_instance

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    folder = _docs(tmp_path)
    instance = dagster_instance(rag_env)
    # As an instance of the release before m009 left it, and as the UI lets one type it.
    instance.add_dynamic_partitions("files_folders", [str(folder)])
    listed = _rag("folders", "list")
    assert listed.startswith("docs\t")
    assert list(instance.get_dynamic_partitions("files_folders")) == ["docs"]
