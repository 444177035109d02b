"""Document lineage and history (`rag show`, rag.document_versions, the UI's document table).

Real Dagster job runs of the files source on real PostgreSQL + pgvector and the real model.
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import dagster as dg
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.types import CallToolResult, TextContent

from rag_pipeline.cli import main
from rag_pipeline.mcp.server import build_server
from rag_pipeline.mcp.tools import KnowledgeTools
from rag_pipeline.settings import Settings
from rag_pipeline.store.connection import connect
from rag_pipeline_tests.pipeline_helpers import ingest, write

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _paragraph(topic: str, facts: str) -> str:
    """A section long enough (over 200 tokens) to be chunked on its own."""
    return " ".join(f"{topic} rule {n}: {facts} in case {n}." for n in range(1, 19))


ALPHA = _paragraph("Alpha locators", "stock sits in an aisle, a bin and a level")
BETA_1 = _paragraph("Beta price lists", "each version holds list, standard and limit prices")
BETA_2 = _paragraph("Beta price lists", "each version holds a valid-from date and prices")
GAMMA = _paragraph("Gamma replenishment", "stock moves when it falls below the minimum")


def guide(beta: str, gamma: bool = False) -> str:
    text = f"# Guide\n\n## Alpha\n\n{ALPHA}\n\n## Beta\n\n{beta}\n"
    return text + (f"\n## Gamma\n\n{GAMMA}\n" if gamma else "")


def rag(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def show_json(target: str) -> dict[str, Any]:
    result = rag("show", target, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _guide_id(database_url: str) -> str:
    with connect(database_url) as conn:
        row = conn.execute(
            "SELECT id FROM rag.documents WHERE source_id LIKE %s", ("%/guide.md",)
        ).fetchone()
    assert row is not None
    return str(row[0])


def _history_rows(database_url: str, document_id: str) -> int:
    with connect(database_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM rag.document_versions WHERE document_id = %s", (document_id,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def _table(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(record.data) for record in metadata["documents"].records]


@pytest.fixture
def edited(
    rag_env: Settings, database_url: str, tmp_path: Path, instance: dg.DagsterInstance
) -> tuple[Path, str, list[dict[str, Any]]]:
    """A folder ingested three times: as written, with Beta changed, then with Gamma added."""
    folder = tmp_path / "corpus"
    write(folder, "guide.md", guide(BETA_1))
    write(folder, "other.md", "# Other\n\nPeriod control opens and closes accounting periods.\n")
    tables = [_table(ingest(folder, instance))]
    write(folder, "guide.md", guide(BETA_2))
    tables.append(_table(ingest(folder, instance)))
    write(folder, "guide.md", guide(BETA_2, gamma=True))
    tables.append(_table(ingest(folder, instance)))
    return folder, _guide_id(database_url), tables


def test_show_json_has_every_version_stage_run_and_chunk_origin_and_the_diff(
    edited: tuple[Path, str, list[dict[str, Any]]],
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, document_id, _ = edited
    monkeypatch.setenv("RAG_DAGSTER_UI_URL", "http://127.0.0.1:3000/")
    report = show_json(document_id)
    hit = rag("show", "--hit", "1", "Gamma replenishment minimum level", "--json")
    assert hit.exit_code == 0, hit.output
    assert json.loads(hit.output)["document"]["id"] == document_id
    assert report["document"]["id"] == document_id
    assert report["document"]["partitions"]
    versions = report["versions"]
    assert [v["version"] for v in versions] == [3, 2, 1]
    assert [v["current"] for v in versions] == [True, False, False]
    run_ids = [v["run_id"] for v in versions]
    assert len(set(run_ids)) == 3
    for run_id in run_ids:
        assert instance.get_run_by_id(run_id) is not None
    stages = report["stages"]
    assert [s["stage"] for s in stages] == ["raw", "markdown", "sanitized", "chunks", "embeddings"]
    for stage in stages:
        assert stage["run_id"] == run_ids[0]  # the file changed: every stage ran again
        assert stage["run_url"] == f"http://127.0.0.1:3000/runs/{run_ids[0]}"
        assert all(stage[field] for field in ("input_hash", "output_hash", "code_version", "at"))
    titles = {s["id"]: s["title"] for s in report["sections"]}
    origins: dict[str, set[str]] = {}
    for chunk in report["chunks"]:
        origins.setdefault(titles[chunk["section_id"]], set()).add(chunk["vector"])
    # Only Gamma's text is new in the third version; Alpha's and Beta's vectors were reused.
    assert origins == {"Alpha": {"reused"}, "Beta": {"reused"}, "Gamma": {"computed"}}
    gamma_chunks = sum(1 for c in report["chunks"] if c["vector"] == "computed")

    result = rag("show", document_id, "--diff", "--against", "1", "--json")
    assert result.exit_code == 0, result.output
    diff = json.loads(result.output)
    changes = {s["name"]: s["change"] for s in diff["sections"]}
    assert changes == {"Guide › Beta": "changed", "Guide › Gamma": "added"}
    beta = next(s for s in diff["sections"] if s["change"] == "changed")["diff"]
    assert "-Beta price lists rule 1: each version holds list" in beta
    assert "+Beta price lists rule 1: each version holds a valid-from" in beta
    assert "Alpha" not in beta
    # Alpha's chunks are the same texts: not re-embedded. Gamma's were embedded by this
    # version's run; Beta's new texts by the second version's run (reused from the cache).
    assert diff["chunks_unchanged"] >= 1
    assert diff["chunks_reembedded"] == gamma_chunks
    assert diff["chunks_reused"] >= 1
    last = rag("show", document_id, "--diff")
    assert last.exit_code == 0, last.output
    assert "added: Guide › Gamma" in last.output
    assert "changed:" not in last.output
    text = rag("show", document_id)
    assert text.exit_code == 0, text.output
    assert all(part in text.output for part in ("Guide › Gamma", "v3", "reused", "computed"))


def test_materialization_lists_added_changed_and_deleted_documents(
    edited: tuple[Path, str, list[dict[str, Any]]],
    database_url: str,
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder, document_id, tables = edited
    first, second, _ = tables
    assert sorted((r["change"], r["source_id"].rsplit("/", 1)[-1]) for r in first) == [
        ("added", "guide.md"),
        ("added", "other.md"),
    ]
    assert [(r["change"], r["source_id"].rsplit("/", 1)[-1]) for r in second] == [
        ("changed", "guide.md")
    ]
    assert second[0]["version"]  # the file's size and mtime, or its hash
    other_source = next(r["source_id"] for r in first if r["source_id"].endswith("other.md"))
    other = show_json(other_source)["document"]["id"]
    assert _history_rows(database_url, other) == 1
    (folder / "other.md").unlink()
    deleted = _table(ingest(folder, instance))
    assert [(r["change"], r["source_id"].rsplit("/", 1)[-1]) for r in deleted] == [
        ("deleted", "other.md")
    ]
    assert _history_rows(database_url, other) == 0
    assert _history_rows(database_url, document_id) == 3
    # A broken edit: the stage that failed and its reason show; the indexed version stays.
    write(folder, "guide.md", guide(BETA_2, gamma=True) + "\nOne line more.\n")
    monkeypatch.setenv("RAG_FILES_MAX_BYTES", "1000")
    ingest(folder, instance)
    monkeypatch.delenv("RAG_FILES_MAX_BYTES")
    report = show_json(document_id)
    failed = [s for s in report["stages"] if s["status"] == "failed"]
    assert [s["stage"] for s in failed] == ["raw"]
    assert failed[0]["reason"]
    assert instance.get_run_by_id(failed[0]["run_id"]) is not None
    assert len(report["versions"]) == 3
    text = rag("show", document_id)
    assert f"raw        FAILED  run {failed[0]['run_id']}" in text.output
    result = rag("clear", "--source", "files", "-y")
    assert result.exit_code == 0, result.output
    assert _history_rows(database_url, document_id) == 0


def test_history_survives_backup_and_restore(
    edited: tuple[Path, str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    _, document_id, _ = edited
    before = show_json(document_id)
    dump = tmp_path / "kb.dump"
    assert rag("backup", str(dump)).exit_code == 0
    assert rag("restore", "-y", str(dump)).exit_code == 0
    after = show_json(document_id)
    assert after["versions"] == before["versions"]
    assert after["stages"] == before["stages"]


async def _lineage_calls(settings: Settings, targets: list[str]) -> list[CallToolResult]:
    async with Client(build_server(KnowledgeTools(settings))) as client:
        return [await client.call_tool("get_document_lineage", {"target": t}) for t in targets]


def test_mcp_tool_returns_the_lineage_or_an_error(
    edited: tuple[Path, str, list[dict[str, Any]]], rag_env: Settings
) -> None:
    _, document_id, _ = edited
    report = show_json(document_id)
    chunk_id = report["chunks"][0]["id"]
    by_chunk, unknown = anyio.run(_lineage_calls, rag_env, [chunk_id, "no-such-document"])
    assert not by_chunk.is_error
    assert by_chunk.structured_content is not None
    assert by_chunk.structured_content["document"]["id"] == document_id
    assert by_chunk.structured_content["versions"] == report["versions"]
    assert unknown.is_error
    assert isinstance(unknown.content[0], TextContent)
    assert "no-such-document" in unknown.content[0].text


def test_unknown_target_exits_1_with_one_line(rag_env: Settings) -> None:
    result = rag("show", "no-such-document")
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: no indexed document, chunk or source id 'no-such-document'"
    ]


DEMO_EXPORT = (
    Path(__file__).resolve().parents[1] / "rag_pipeline/demo/wiki/idempiere-demo-export.xml"
)
OLD_TITLE = "Developing Plug-Ins - Get your Plug-In running"
NEW_TITLE = "Plug-In Development - Getting Started"
TROUBLESHOOTING = (
    "== Troubleshooting ==\nA bundle that stays RESOLVED lacks an import: check the "
    "Import-Package header of its MANIFEST.MF and the console's diag command.\n\n"
)


def _ingest_wiki(export: Path, instance: dg.DagsterInstance) -> None:
    from rag_pipeline.definitions import defs

    key = f"export:{export.resolve()}"
    if not instance.has_dynamic_partition("wiki_partitions", key):
        instance.add_dynamic_partitions("wiki_partitions", [key])
    job = defs().resolve_job_def("wiki_ingest_job")
    assert job.execute_in_process(instance=instance, partition_key=key).success


def test_a_wiki_page_moved_and_edited_is_one_document_with_two_versions(
    rag_env: Settings,
    tmp_path: Path,
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RAG_WIKI_API_URL", raising=False)
    export = tmp_path / "wiki.xml"
    text = DEMO_EXPORT.read_text(encoding="utf-8")
    export.write_text(text, encoding="utf-8")
    _ingest_wiki(export, instance)
    before = show_json("101")
    assert before["document"]["title"] == OLD_TITLE
    # The page is moved (same page id, new title) and edited (a new revision, a new section).
    assert text.count("<id>2101</id>") == 1
    moved = (
        text.replace(f"<title>{OLD_TITLE}</title>", f"<title>{NEW_TITLE}</title>")
        .replace("<id>2101</id>", "<id>2201</id>")
        .replace("== Running it ==", TROUBLESHOOTING + "== Running it ==", 1)
    )
    export.write_text(moved, encoding="utf-8")
    _ingest_wiki(export, instance)
    after = show_json("101")
    assert after["document"]["id"] == before["document"]["id"]
    assert after["document"]["title"] == NEW_TITLE
    assert [(v["version"], v["source_version"], v["title"]) for v in after["versions"]] == [
        (2, "2201", NEW_TITLE),
        (1, "2101", OLD_TITLE),
    ]
    result = rag("show", "101", "--source", "wiki", "--diff", "--json")
    assert result.exit_code == 0, result.output
    changes = [(s["change"], s["name"]) for s in json.loads(result.output)["sections"]]
    assert changes == [("added", "Troubleshooting")]


@pytest.fixture
def own_idempiere(
    rag_env: Settings, pg_admin_uri: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A demo iDempiere database of this test alone, configured through IDEMPIERE_DB_*."""
    import uuid

    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict

    from rag_pipeline.sources.idempiere.demo_db import admin_conninfo, ensure_demo_database_on

    name = f"idem_{uuid.uuid4().hex[:10]}"
    url = ensure_demo_database_on(pg_admin_uri, name)
    params = conninfo_to_dict(url)
    monkeypatch.setenv("IDEMPIERE_DB_HOST", str(params["host"]))
    monkeypatch.setenv("IDEMPIERE_DB_PORT", str(params.get("port") or 5432))
    monkeypatch.setenv("IDEMPIERE_DB_NAME", name)
    monkeypatch.setenv("IDEMPIERE_DB_USER", str(params["user"]))
    if params.get("passfile"):
        line = Path(str(params["passfile"])).read_text().splitlines()[0]
        monkeypatch.setenv("IDEMPIERE_DB_PASSWORD", line.split(":", 4)[4])
    monkeypatch.setenv("RAG_LANGUAGES", "en_US,es_CO")
    yield url
    with psycopg.connect(admin_conninfo(url), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _ingest_k_entry(language: str, instance: dg.DagsterInstance) -> None:
    from rag_pipeline.definitions import defs
    from rag_pipeline.orchestration.reconcile import register

    job = defs().resolve_job_def("k_entry_ingest_job")
    assert job.partitions_def is not None
    register(job.partitions_def, [language], instance)
    assert job.execute_in_process(instance=instance, partition_key=language).success


def test_a_k_entry_translation_edit_is_a_version_of_that_language_only(
    own_idempiere: str, instance: dg.DagsterInstance
) -> None:
    import psycopg

    _ingest_k_entry("en_US", instance)
    _ingest_k_entry("es_CO", instance)
    ambiguous = rag("show", "1000003", "--source", "k_entry")
    assert ambiguous.exit_code == 1
    assert "--lang en_US" in ambiguous.output
    assert "--lang es_CO" in ambiguous.output
    with psycopg.connect(own_idempiere) as conn:
        conn.execute(
            "UPDATE k_entry_trl SET textmsg = textmsg || '<p>Nueva nota sobre el inventario.</p>',"
            " updated = now() WHERE k_entry_id = 1000003 AND ad_language = 'es_CO'"
        )
    _ingest_k_entry("es_CO", instance)
    spanish = json.loads(
        rag("show", "1000003", "--source", "k_entry", "--lang", "es_CO", "--json").output
    )
    english = json.loads(
        rag("show", "1000003", "--source", "k_entry", "--lang", "en_US", "--json").output
    )
    assert [v["version"] for v in spanish["versions"]] == [2, 1]
    first, second = spanish["versions"][1], spanish["versions"][0]
    assert first["source_version"] != second["source_version"]  # the translation's Updated
    assert [v["version"] for v in english["versions"]] == [1]
    result = rag("show", "1000003", "--source", "k_entry", "--lang", "es_CO", "--diff", "--json")
    assert result.exit_code == 0, result.output
    sections = json.loads(result.output)["sections"]
    assert [s["change"] for s in sections] == ["changed"]
    assert "+Nueva nota sobre el inventario." in sections[0]["diff"]


def test_an_existing_index_upgrades_with_its_current_version_as_version_1(
    rag_env: Settings, database_url: str, tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    from rag_pipeline.store.migrations import migrate

    folder = tmp_path / "corpus"
    write(folder, "guide.md", guide(BETA_1))
    ingest(folder, instance)
    document_id = _guide_id(database_url)
    with connect(database_url) as conn:
        # The database as it was before m010.
        conn.execute("DROP TABLE rag.document_versions")
        conn.execute("DROP FUNCTION rag.drop_document_history() CASCADE")
        conn.execute("DELETE FROM rag.schema_migrations WHERE version = 10")
        conn.commit()
        assert 10 in migrate(conn)
    report = show_json(document_id)
    (only,) = report["versions"]
    assert (only["version"], only["run_id"], only["current"]) == (1, None, True)
    assert only["chunks"] == len(report["chunks"]) > 0
    assert {c["vector"] for c in report["chunks"]} == {"unknown"}
    # The next change is version 2, and the upgraded trigger still guards the history.
    write(folder, "guide.md", guide(BETA_2))
    ingest(folder, instance)
    assert [v["version"] for v in show_json(document_id)["versions"]] == [2, 1]
