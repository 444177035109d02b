"""The files source end to end: real Dagster job, real PostgreSQL + pgvector, real model."""

import json
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.core.embedding import Embedder
from rag_pipeline.search import Searcher
from rag_pipeline.settings import Settings
from rag_pipeline.store.connection import connect
from rag_pipeline_tests.pipeline_helpers import ingest, write

pytestmark = pytest.mark.integration

WAREHOUSE_MD = """---
title: Warehouse setup
tags: [inventory]
---
# Warehouse

A warehouse holds stock in locators.

## Locators

Every locator has an aisle (X), a bin (Y) and a level (Z) coordinate.
One locator of each warehouse is the default locator.

## Replenishment

Replenishment rules move stock when it falls below the minimum level.
Run the Replenish Report to see which products need ordering.
"""

PRICE_HTML = """<html><head><title>Price lists</title><script>track()</script></head>
<body><nav>menu</nav><h1>Price lists</h1>
<p>A price list has versions; each version holds <b>product prices</b>.</p>
<ul><li>List price</li><li>Standard price</li><li>Limit price</li></ul></body></html>"""

ROLES_EDITORJS = {
    "time": 1700000000000,
    "version": "2.31.0",
    "blocks": [
        {"id": "a1", "type": "header", "data": {"text": "User roles", "level": 1}},
        {
            "id": "a2",
            "type": "paragraph",
            "data": {"text": "A <b>role</b> grants access to windows and processes."},
        },
        {
            "id": "a3",
            "type": "list",
            "data": {"style": "unordered", "items": ["Window Access", "Process Access"]},
        },
    ],
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    write(folder, "warehouse.md", WAREHOUSE_MD)
    write(folder, "pricing/price-lists.html", PRICE_HTML)
    write(folder, "roles.json", json.dumps(ROLES_EDITORJS))
    write(folder, "notes.txt", "Period control: open and close accounting periods per month.")
    write(folder, "ignored.pdf", "not a supported type")
    write(folder, ".hidden.md", "# Hidden\n\nnever ingested")
    return folder


def _relative(source_id: str) -> str:
    """A file's source id is `<folder name>/<relative path>`: keep the relative path."""
    for folder in ("corpus/", "crowded/"):
        if source_id.startswith(folder):
            return source_id.removeprefix(folder)
    return source_id


def _documents(database_url: str) -> dict[str, tuple[str, str]]:
    with connect(database_url) as conn:
        rows = conn.execute("SELECT source_id, title, content_hash FROM rag.documents").fetchall()
    return {_relative(r[0]): (r[1], r[2]) for r in rows}


def _errors(database_url: str) -> dict[str, str]:
    with connect(database_url) as conn:
        rows = conn.execute("SELECT source_id, reason FROM rag.ingest_errors").fetchall()
    return {_relative(r[0]): r[1] for r in rows}


def test_ingest_then_unchanged_reingest_embeds_nothing(
    rag_env: Settings, database_url: str, corpus: Path, instance: dg.DagsterInstance
) -> None:
    first = ingest(corpus, instance)
    assert first["documents_new"] == 4
    assert first["chunks_embedded"] > 0
    documents = _documents(database_url)
    assert sorted(documents) == [
        "notes.txt",
        "pricing/price-lists.html",
        "roles.json",
        "warehouse.md",
    ]
    # Titles: front matter, <title>/first heading, Editor.js header, file name.
    assert documents["warehouse.md"][0] == "Warehouse setup"
    assert documents["pricing/price-lists.html"][0] == "Price lists"
    assert documents["roles.json"][0] == "User roles"
    assert documents["notes.txt"][0] == "notes"

    second = ingest(corpus, instance)
    assert second["chunks_embedded"] == 0
    assert second["documents_unchanged"] == 4
    assert second["documents_new"] == second["documents_changed"] == 0
    assert _documents(database_url) == documents


def test_edit_reembeds_only_changed_chunks_and_delete_removes_rows(
    rag_env: Settings, database_url: str, corpus: Path, instance: dg.DagsterInstance
) -> None:
    ingest(corpus, instance)
    with connect(database_url) as conn:
        chunks_before = conn.execute(
            "SELECT count(*) FROM rag.chunks c JOIN rag.documents d ON d.id = c.document_id"
            " WHERE d.source_id LIKE '%/warehouse.md'"
        ).fetchone()
    assert chunks_before is not None
    assert chunks_before[0] >= 2

    edited = WAREHOUSE_MD.replace("falls below the minimum level", "drops under the minimum")
    write(corpus, "warehouse.md", edited)
    (corpus / "notes.txt").unlink()
    stats = ingest(corpus, instance)
    assert stats["documents_changed"] == 1
    assert stats["documents_deleted"] == 1
    assert stats["documents_unchanged"] == 2
    # Only the edited section's chunk is new; the other sections' chunks come from the cache.
    assert stats["chunks_embedded"] == 1
    assert stats["chunks_reused"] >= 1
    documents = _documents(database_url)
    assert "notes.txt" not in documents
    with connect(database_url) as conn:
        orphans = conn.execute(
            "SELECT count(*) FROM rag.chunks"
            " WHERE document_id NOT IN (SELECT id FROM rag.documents)"
        ).fetchone()
        stage_rows = conn.execute(
            "SELECT count(*) FROM rag.stage_documents WHERE doc_key LIKE '%/notes.txt'"
        ).fetchone()
    assert orphans == (0,)
    assert stage_rows == (0,)


def test_bad_files_fail_with_reasons_and_the_rest_is_ingested(
    rag_env: Settings, database_url: str, corpus: Path, instance: dg.DagsterInstance
) -> None:
    write(corpus, "broken.json", '{"blocks": [ {"type": "paragraph", ')
    write(corpus, "no-blocks.json", '{"time": 1, "version": "2.31.0"}')
    write(corpus, "latin1.md", "Caf\xe9 cr\xe8me".encode("latin-1"))
    with (corpus / "huge.md").open("wb") as handle:
        handle.truncate(50 * 1024 * 1024)
    stats = ingest(corpus, instance)

    assert stats["documents_new"] == 4
    errors = _errors(database_url)
    assert set(errors) == {"broken.json", "no-blocks.json", "latin1.md", "huge.md"}
    assert "UTF-8" in errors["latin1.md"]
    assert "RAG_FILES_MAX_BYTES" in errors["huge.md"]
    assert "blocks" in errors["no-blocks.json"]
    assert "JSON" in errors["broken.json"]
    assert set(_documents(database_url)) == {
        "notes.txt",
        "pricing/price-lists.html",
        "roles.json",
        "warehouse.md",
    }


def test_a_document_that_turns_bad_keeps_its_previous_version_searchable(
    rag_env: Settings,
    database_url: str,
    corpus: Path,
    instance: dg.DagsterInstance,
    embedder: Embedder,
) -> None:
    ingest(corpus, instance)
    before = _documents(database_url)["roles.json"]
    write(corpus, "roles.json", '{"blocks": "not a list"}')
    stats = ingest(corpus, instance)
    assert stats["documents_changed"] == 0
    assert _documents(database_url)["roles.json"] == before
    assert "roles.json" in _errors(database_url)

    hits = Searcher(rag_env, embedder=embedder).search("which role grants window access", top_k=3)
    assert _relative(hits[0].source_id) == "roles.json"

    # Fixed again: the new version replaces the old one.
    fixed = dict(ROLES_EDITORJS)
    fixed["blocks"] = [
        *ROLES_EDITORJS["blocks"],
        {"type": "paragraph", "data": {"text": "Org Access too."}},
    ]  # type: ignore[list-item]
    write(corpus, "roles.json", json.dumps(fixed))
    stats = ingest(corpus, instance)
    assert stats["documents_changed"] == 1
    assert _documents(database_url)["roles.json"] != before


def test_force_recomputes_everything_but_reuses_cached_vectors(
    rag_env: Settings, database_url: str, corpus: Path, instance: dg.DagsterInstance
) -> None:
    ingest(corpus, instance)
    stats = ingest(corpus, instance, force=True)
    assert stats["documents_changed"] == 4
    assert stats["chunks_embedded"] == 0
    assert stats["chunks_reused"] > 0


def test_search_returns_parent_sections_with_metadata(
    rag_env: Settings, corpus: Path, instance: dg.DagsterInstance, embedder: Embedder
) -> None:
    ingest(corpus, instance)
    searcher = Searcher(rag_env, embedder=embedder)
    hits = searcher.search("aisle bin level coordinates of a locator", top_k=3)
    best = hits[0]
    assert best.source_type == "files"
    # Named after the folder, never by its path: the identity survives a move.
    assert best.source_id == f"{corpus.name}/warehouse.md"
    assert best.title == "Warehouse setup"
    assert best.section_title == "Locators"
    assert "aisle (X)" in best.text
    assert "default locator" in best.parent_text
    assert best.url.startswith("file://")
    assert 0 < best.score <= 1
    assert len({(h.document_id, h.section_id) for h in hits}) == len(hits)

    only_chunk = searcher.search("aisle bin level", top_k=1, expand="chunk")
    assert only_chunk[0].parent_text == ""
    assert searcher.search("aisle", source_types=["wiki"]) == []
    assert searcher.search("aisle", languages=["hu"]) == []
    assert searcher.search("aisle", languages=["en"])


def test_one_long_section_does_not_crowd_out_other_hits(
    rag_env: Settings, tmp_path: Path, instance: dg.DagsterInstance, embedder: Embedder
) -> None:
    folder = tmp_path / "crowded"
    # ~150 near-identical chunks in one section are all nearer than any other section.
    write(folder, "long.md", "# Locators\n\n" + "Locators hold stock in a warehouse. " * 3000)
    for name in ("aisles", "bins", "levels"):
        write(folder, f"{name}.md", f"# {name}\n\nLocator {name} are coordinates in a warehouse.")
    ingest(folder, instance)
    hits = Searcher(rag_env, embedder=embedder).search("locators hold stock", top_k=4)
    assert len(hits) == 4
    assert len({h.section_id for h in hits}) == 4
    assert _relative(hits[0].source_id) == "long.md"


ZORBLAX_MD = """# Booking a Zorblax pickup

Open the Pickups window, choose the warehouse the parcels leave from and the day the
Zorblax courier should come, then confirm the booking with the Book Pickup button.

## Cancelling a pickup

Call the depot one day before the courier comes.

## Paying for a pickup

Every pickup is invoiced at the end of the month on the courier's own invoice, with one
line per pickup and the number of parcels it collected.
"""


def test_a_short_section_is_found_under_its_own_title(
    rag_env: Settings,
    database_url: str,
    shared_fixtures: Path,
    tmp_path: Path,
    instance: dg.DagsterInstance,
    embedder: Embedder,
) -> None:
    # Issue 47: a short section with a heading and text of its own was folded into its
    # neighbour, so a hit for its text named the neighbour's title. The wiki fixtures' case:
    # "## Description" and one line, under "Usage"; and the issue's own example.
    folder = tmp_path / "short"
    page = "new-features__v7.1__migrate-storage-provider.md"
    write(folder, page, (shared_fixtures / "wiki" / "docs_md" / page).read_text("utf-8"))
    write(folder, "zorblax.md", ZORBLAX_MD)
    ingest(folder, instance)
    with connect(database_url) as conn:
        sections = conn.execute(
            "SELECT d.source_id, s.title, s.heading_path, s.text FROM rag.sections s"
            " JOIN rag.documents d ON d.id = s.document_id ORDER BY d.source_id, s.ordinal"
        ).fetchall()
    assert ("Cancelling a pickup", ["Booking a Zorblax pickup", "Cancelling a pickup"]) in [
        (s[1], s[2]) for s in sections
    ]
    (description,) = [s[3] for s in sections if s[1] == "Description"]
    assert (
        description
        == "## Description\n\nThis functionality migrates files between storage providers"
    )

    searcher = Searcher(rag_env, embedder=embedder)
    for query, source, title in [
        ("call the depot to cancel a Zorblax pickup", "zorblax.md", "Cancelling a pickup"),
        ("cancelling a pickup", "zorblax.md", "Cancelling a pickup"),
        ("migrate files between storage providers", page, "Description"),
    ]:
        best = searcher.search(query, top_k=3)[0]
        assert (best.source_id, best.section_title) == (f"short/{source}", title), query
