"""The k_entry source on real PostgreSQL: extended and core-only schemas, filters, translations."""

import json
from collections.abc import Iterator
from datetime import datetime, timedelta

import psycopg
import pytest

from rag_pipeline.core.models import SourceFormat
from rag_pipeline.core.normalize import NormalizationError, to_markdown
from rag_pipeline.core.source import DocumentRef, SourceDocument
from rag_pipeline.sources.idempiere.demo_db import (
    KnowledgeEntry,
    insert_entry,
    load_demo_content,
    load_schema_only,
    read_knowledge_base,
)
from rag_pipeline.sources.idempiere.k_entry import (
    KEntrySource,
    detect_schema,
    sniff_format,
    with_keywords,
)

CLIENTS = [1000014, 11]
INDEXED = [str(i) for i in range(1000001, 1000011)]


@pytest.fixture
def demo_url(database_url: str) -> str:
    """A fresh database holding the whole demo content (extended K_Entry schema)."""
    with psycopg.connect(database_url) as conn:
        load_demo_content(conn)
    return database_url


@pytest.fixture
def source(demo_url: str) -> Iterator[KEntrySource]:
    src = KEntrySource(demo_url, client_ids=CLIENTS, languages=["all"])
    yield src
    src.close()


def _documents(src: KEntrySource, language: str) -> dict[str, SourceDocument]:
    refs = [r for r in src.list_documents(language) if isinstance(r, DocumentRef)]
    docs = [d for d in src.fetch(refs) if isinstance(d, SourceDocument)]
    assert len(docs) == len(refs)
    return {d.source_id: d for d in docs}


def _entry(
    entry_id: int, text: str, edit_mode: str | None = None, **extra: object
) -> KnowledgeEntry:
    fields: dict[str, object] = {
        "id": entry_id,
        "topic": 1000000,
        "edit_mode": edit_mode,
        "name": f"Entry {entry_id}",
        "keywords": None,
        "url": None,
        "text": text,
        "client_id": 11,
        "active": True,
        "public": True,
        "valid_to": None,
        "updated": datetime(2026, 3, 1),
        "translations": {},
    }
    fields.update(extra)
    return KnowledgeEntry(**fields)  # type: ignore[arg-type]


def test_extended_schema_lists_only_active_public_current_entries_of_the_clients(
    source: KEntrySource,
) -> None:
    assert source.schema.edit_mode
    assert source.schema.translations
    assert source.partition_keys() == ["en_US", "es_CO"]
    english = _documents(source, "en_US")
    # 1000011 inactive, 1000012 expired, 1000013 another client, 1000014 not public.
    assert sorted(english) == INDEXED
    spanish = _documents(source, "es_CO")
    # 1000010 has no translation row: it exists in the base language only.
    assert sorted(spanish) == INDEXED[:-1]


def test_documents_carry_format_breadcrumb_keywords_and_reference(source: KEntrySource) -> None:
    docs = _documents(source, "en_US")
    formats = {d.metadata["original_format"] for d in docs.values()}
    assert formats == {"BLK", "GFM", "HTM"}
    bp = docs["1000001"]
    assert bp.original_format is SourceFormat.EDITORJS
    assert bp.title == "One business partner as customer and vendor"
    assert (
        bp.breadcrumb == "How-to Guides › Master Data › One business partner as customer and vendor"
    )
    assert bp.url == "https://wiki.idempiere.org/en/Business_Partner_(Window_ID-123)"
    markdown = to_markdown(bp.body, bp.original_format).markdown
    assert "Keywords: business partner, customer, vendor" in markdown
    assert "Business_Partner_(Window_ID-123)" in markdown
    assert '"blocks"' not in markdown
    # No edit mode on the row: sniffed as HTML.
    processing = docs["1000010"]
    assert processing.original_format is SourceFormat.HTML
    assert processing.metadata["format_from"] == "sniffed"
    assert processing.url == ""
    # Every body converts (the chain's converter accepts all three formats).
    for doc in docs.values():
        assert to_markdown(doc.body, doc.original_format).markdown.strip()


def test_translations_fall_back_field_by_field(source: KEntrySource) -> None:
    english = _documents(source, "en_US")
    spanish = _documents(source, "es_CO")
    assert spanish["1000003"].title == "Bodegas y ubicaciones"
    assert "bodega" in spanish["1000003"].body
    # 1000008's translation has only a name: text and keywords come from the base row.
    only_name = spanish["1000008"]
    assert only_name.title == "Departamentos y centros de costo"
    assert only_name.body == english["1000008"].body
    assert only_name.metadata["keywords"] == english["1000008"].metadata["keywords"]
    assert only_name.version != english["1000008"].version


def test_version_follows_updated_and_content(source: KEntrySource, demo_url: str) -> None:
    before = {r.source_id: r.version for r in source.list_documents("en_US")}  # type: ignore[union-attr]
    again = {r.source_id: r.version for r in source.list_documents("en_US")}  # type: ignore[union-attr]
    assert before == again
    with psycopg.connect(demo_url) as conn:
        # An edit that keeps the timestamp still changes the version (content hash).
        conn.execute("UPDATE k_entry SET keywords = 'changed' WHERE k_entry_id = 1000002")
        conn.execute("UPDATE k_entry SET isactive = 'N' WHERE k_entry_id = 1000003")
        conn.execute(
            "UPDATE k_entry SET validto = %s WHERE k_entry_id = 1000004",
            (datetime.now() - timedelta(days=1),),
        )
        conn.execute("DELETE FROM k_entry WHERE k_entry_id = 1000005")
    after = {r.source_id: r.version for r in source.list_documents("en_US")}  # type: ignore[union-attr]
    assert after["1000002"] != before["1000002"]
    assert set(before) - set(after) == {"1000003", "1000004", "1000005"}
    assert all(after[k] == before[k] for k in after if k != "1000002")


def test_client_filter_is_configurable(demo_url: str) -> None:
    src = KEntrySource(demo_url, client_ids=[12], languages=["en_US"])
    try:
        assert [r.source_id for r in src.list_documents("en_US")] == ["1000013"]  # type: ignore[union-attr]
    finally:
        src.close()


def test_broken_editorjs_entry_fails_only_its_own_conversion(demo_url: str) -> None:
    broken = '{"blocks": [{"type": "paragraph", "data": {"text": "cut off'
    with psycopg.connect(demo_url) as conn:
        insert_entry(conn, _entry(1000099, broken, "BLK", keywords="kw"))
    src = KEntrySource(demo_url, client_ids=CLIENTS)
    try:
        docs = _documents(src, "en_US")
    finally:
        src.close()
    assert sorted(docs) == sorted([*INDEXED, "1000099"])
    bad = docs["1000099"]
    assert bad.original_format is SourceFormat.EDITORJS
    assert bad.body == broken  # delivered as stored: no footer spliced into broken JSON
    with pytest.raises(NormalizationError):
        to_markdown(bad.body, bad.original_format)
    for key, doc in docs.items():
        if key != "1000099":
            to_markdown(doc.body, doc.original_format)


def test_core_only_schema_sniffs_formats_and_has_only_the_base_language(
    database_url: str,
) -> None:
    kb = read_knowledge_base()
    with psycopg.connect(database_url) as conn:
        load_schema_only(conn, extended_k_entry=False)
        assert detect_schema(conn).edit_mode is False
        from rag_pipeline.sources.idempiere.demo_db import load_knowledge_base

        load_knowledge_base(conn, kb)
    src = KEntrySource(database_url, client_ids=CLIENTS, languages=["all"])
    try:
        assert src.schema.edit_mode is False
        assert src.schema.translations is False
        assert src.partition_keys() == ["en_US"]
        docs = _documents(src, "en_US")
        assert list(src.list_documents("es_CO")) == []
    finally:
        src.close()
    assert sorted(docs) == INDEXED
    expected = {e.id: e.edit_mode for e in kb.entries}
    codes = {"BLK": SourceFormat.EDITORJS, "GFM": SourceFormat.MARKDOWN, "HTM": SourceFormat.HTML}
    for key, doc in docs.items():
        mode = expected[int(key)]
        assert doc.metadata["format_from"] == "sniffed"
        assert doc.original_format is codes.get(mode or "HTM")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"time": 1, "blocks": []}', SourceFormat.EDITORJS),
        ('  {"blocks": [{"type": "paragraph"', SourceFormat.EDITORJS),
        ('{"note": "json, but not Editor.js"}', SourceFormat.MARKDOWN),
        ("<p>Hello <b>there</b></p>", SourceFormat.HTML),
        ("Text with a <br> break", SourceFormat.HTML),
        ("# Heading\n\n- a list with a < b", SourceFormat.MARKDOWN),
        ("plain words", SourceFormat.MARKDOWN),
    ],
)
def test_sniff_format(text: str, expected: SourceFormat) -> None:
    assert sniff_format(text) is expected


@pytest.mark.parametrize(
    ("body", "fmt"),
    [
        (
            json.dumps(
                {
                    "blocks": [
                        {"type": "header", "data": {"text": "Title", "level": 2}},
                        {"type": "paragraph", "data": {"text": "Body"}},
                    ]
                }
            ),
            SourceFormat.EDITORJS,
        ),
        ("<h2>Title</h2><p>Body</p>", SourceFormat.HTML),
        ("## Title\n\nBody\n", SourceFormat.MARKDOWN),
        ("Title\n=====\n\nBody\n", SourceFormat.MARKDOWN),
    ],
)
def test_keywords_go_into_the_first_section_in_the_body_format(
    body: str, fmt: SourceFormat
) -> None:
    out = to_markdown(with_keywords(body, fmt, "a & b", "https://x.test/p?q=1"), fmt).markdown
    lines = [line for line in out.splitlines() if line.strip()]
    # The heading still leads; keywords and link follow it, before the body text.
    assert lines[0].lstrip("# ") == "Title"
    assert lines[1].startswith("Keywords: a & b.")
    assert "https://x.test/p?q=1" in lines[1]
    assert lines[2] == "Body"


def test_keywords_lead_a_body_without_heading() -> None:
    out = to_markdown(with_keywords("<p>Body</p>", SourceFormat.HTML, "kw", ""), SourceFormat.HTML)
    assert out.markdown.splitlines()[0] == "Keywords: kw."
    blocks = json.dumps({"blocks": []})
    assert with_keywords(blocks, SourceFormat.EDITORJS, "", "") == blocks
