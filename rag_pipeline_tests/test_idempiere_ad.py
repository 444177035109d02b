"""The ad_metadata source on real PostgreSQL loaded with the fixture schema and real AD rows."""

from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest

from rag_pipeline.core.models import SourceFormat
from rag_pipeline.core.normalize import to_markdown
from rag_pipeline.core.source import DocumentRef, SourceDocument
from rag_pipeline.sources.idempiere.ad import (
    ENTITY_TYPES,
    ADPartition,
    ADSource,
    parse_partition_key,
)
from rag_pipeline.sources.idempiere.demo_db import load_demo_content
from rag_pipeline.sources.idempiere.known_answers import (
    KnownAnswer,
    build_known_answers,
    score_known_answers,
)


@pytest.fixture
def demo_url(database_url: str) -> str:
    with psycopg.connect(database_url) as conn:
        load_demo_content(conn)
    return database_url


@pytest.fixture
def source(demo_url: str) -> Iterator[ADSource]:
    src = ADSource(demo_url, languages=["all"])
    yield src
    src.close()


def _versions(src: ADSource, key: str) -> dict[str, str]:
    return {r.source_id: r.version for r in src.list_documents(key) if isinstance(r, DocumentRef)}


def _fetch(src: ADSource, key: str) -> dict[str, SourceDocument]:
    refs = [r for r in src.list_documents(key) if isinstance(r, DocumentRef)]
    docs = {d.source_id: d for d in src.fetch(refs) if isinstance(d, SourceDocument)}
    assert len(docs) == len(refs)
    return docs


def test_partitions_are_entity_types_times_languages(source: ADSource) -> None:
    keys = source.partition_keys()
    assert len(keys) == len(ENTITY_TYPES) * 2
    assert "window|en_US" in keys
    assert "field|es_CO" in keys
    for key in keys:
        assert not set(key) & set(",[]")
    assert parse_partition_key("es_CO|window") == ADPartition("window", "es_CO")
    with pytest.raises(ValueError, match="partition key"):
        parse_partition_key("window")


def test_all_languages_are_the_active_system_languages_where_ad_language_says(
    demo_url: str,
) -> None:
    # A real iDempiere keeps a language's translation rows after the language is switched off
    # (AD_Language.IsSystemLanguage or IsActive 'N'): `all` leaves such a language out.
    with psycopg.connect(demo_url) as conn:
        conn.execute(
            "CREATE TABLE ad_language (ad_language VARCHAR(6) PRIMARY KEY,"
            " isactive CHAR(1), isbaselanguage CHAR(1), issystemlanguage CHAR(1))"
        )
        conn.execute(
            "INSERT INTO ad_language VALUES ('en_US', 'Y', 'Y', 'N'), ('es_CO', 'Y', 'N', 'N'),"
            " ('de_DE', 'Y', 'N', 'Y')"
        )

    def languages() -> set[str]:
        src = ADSource(demo_url, languages=["all"])
        try:
            return {key.split("|")[1] for key in src.partition_keys()}
        finally:
            src.close()

    assert languages() == {"en_US"}  # de_DE is a system language without translations
    with psycopg.connect(demo_url) as conn:
        conn.execute("UPDATE ad_language SET issystemlanguage = 'Y' WHERE ad_language = 'es_CO'")
    assert languages() == {"en_US", "es_CO"}
    with psycopg.connect(demo_url) as conn:
        conn.execute("UPDATE ad_language SET isactive = 'N' WHERE ad_language = 'es_CO'")
    assert languages() == {"en_US"}


def test_business_partner_window_names_its_tabs_fields_and_tables(source: ADSource) -> None:
    windows = _fetch(source, "window|en_US")
    bp = windows["AD_Window:123"]
    assert bp.title == "Business Partner"
    assert bp.original_format is SourceFormat.MARKDOWN
    assert bp.language == "en_US"
    for expected in ("customers", "vendors", "`C_BPartner`", "`C_BPartner_ID`", "### Customer"):
        assert expected in bp.body
    markdown = to_markdown(bp.body, bp.original_format).markdown
    assert "IsCustomer" in markdown
    # A window without tabs or help still makes a document.
    assert windows["AD_Window:200115"].body.startswith("Window **MFA Registered Device**")


def test_spanish_documents_translate_and_fall_back(source: ADSource) -> None:
    spanish = _fetch(source, "window|es_CO")
    assert spanish["AD_Window:123"].title == "Tercero"
    assert spanish["AD_Window:123"].language == "es_CO"
    assert "Mantener terceros" in spanish["AD_Window:123"].body
    # No es_CO row for a window of a later migration: the English text stands in.
    assert spanish["AD_Window:200105"].title == "Bank Transfer"
    tabs = _fetch(source, "tab|es_CO")
    assert tabs["AD_Tab:223"].breadcrumb == "Tercero › Cliente"


def test_tables_fields_and_processes(source: ADSource) -> None:
    tables = _fetch(source, "table|en_US")
    bpartner = tables["AD_Table:291"]
    assert bpartner.title == "Business Partner"
    assert "| Customer | `IsCustomer` |" in bpartner.body
    fields = _fetch(source, "field|en_US")
    # DISTINCT ON (column name) per window: one document per column of a window (fields whose
    # AD_Column row is not in the fixture are documented one by one).
    pairs = Counter(
        (d.metadata["window_id"], d.metadata["column_name"])
        for d in fields.values()
        if d.metadata["column_name"]
    )
    assert pairs
    assert max(pairs.values()) == 1
    customer = next(d for d in fields.values() if d.metadata["column_name"] == "IsCustomer")
    assert customer.breadcrumb == "Business Partner › Customer › Customer"
    assert "`IsCustomer`" in customer.body
    assert "`C_BPartner`" in customer.body
    processes = _fetch(source, "process|en_US")
    create_table = processes["AD_Process:200134"]
    assert "## Parameters" in create_table.body
    assert "`TableName`, mandatory" in create_table.body
    # Every document converts through the chain's Markdown converter.
    for doc in [*tables.values(), *fields.values(), *processes.values()]:
        assert to_markdown(doc.body, doc.original_format).markdown.strip()


def test_changes_deactivations_and_deletions_change_the_listing(
    source: ADSource, demo_url: str
) -> None:
    windows_before = _versions(source, "window|en_US")
    assert _versions(source, "window|en_US") == windows_before
    tabs_before = _versions(source, "tab|en_US")
    with psycopg.connect(demo_url) as conn:
        # iDempiere touches Updated on every save, a deactivation included.
        conn.execute("UPDATE ad_tab SET isactive = 'N', updated = now() WHERE ad_tab_id = 223")
        conn.execute("UPDATE ad_window SET isactive = 'N' WHERE ad_window_id = 143")
        # A deleted field touches nothing else: the row count still changes the version.
        conn.execute("DELETE FROM ad_field WHERE ad_field_id = 9000106")
        conn.execute(
            "UPDATE ad_window_trl SET help = 'Nueva ayuda', updated = now() "
            "WHERE ad_window_id = 100 AND ad_language = 'es_CO'"
        )
    windows_after = _versions(source, "window|en_US")
    assert "AD_Window:143" not in windows_after
    assert windows_after["AD_Window:123"] != windows_before["AD_Window:123"]
    assert windows_after["AD_Window:100"] == windows_before["AD_Window:100"]
    tabs_after = _versions(source, "tab|en_US")
    assert "AD_Tab:223" not in tabs_after
    assert "AD_Tab:186" not in tabs_after  # its window is inactive
    bp = _fetch(source, "window|en_US")["AD_Window:123"]
    assert "### Customer" not in bp.body
    assert "IsVendor" not in bp.body
    spanish = _fetch(source, "window|es_CO")["AD_Window:100"]
    assert "Nueva ayuda" in spanish.body
    assert set(tabs_before) - set(tabs_after) >= {"AD_Tab:223", "AD_Tab:186"}


def test_null_help_and_blank_translations(source: ADSource, demo_url: str) -> None:
    with psycopg.connect(demo_url) as conn:
        conn.execute(
            "UPDATE ad_window SET help = NULL, description = NULL WHERE ad_window_id = 123"
        )
        conn.execute(
            "UPDATE ad_window_trl SET description = '' WHERE ad_window_id = 123 "
            "AND ad_language = 'es_CO'"
        )
    english = _fetch(source, "window|en_US")["AD_Window:123"]
    assert "None" not in english.body
    assert "Maintain Business Partners" not in english.body
    spanish = _fetch(source, "window|es_CO")["AD_Window:123"]
    # The template words are Spanish too, the identifiers as they are.
    assert spanish.body.startswith("Ventana **"), spanish.body[:80]
    assert "(Mantener, AD_Window_ID 123) con las pestañas" in spanish.body
    assert "Window **" not in spanish.body
    assert "Maintain" not in spanish.body
    assert english.body.startswith("Window **")
    # Blank translation, NULL base: nothing, not the string 'None'.
    assert "Mantener terceros" not in spanish.body
    assert "None" not in spanish.body


def test_listing_streams_through_a_server_side_cursor(source: ADSource) -> None:
    listing = source.list_documents("field|en_US")
    first = next(listing)
    assert isinstance(first, DocumentRef)
    cursors = source.conn.execute("SELECT name FROM pg_cursors").fetchall()
    assert any(name.startswith("rag_ad_field_list") for (name,) in cursors)
    rest = list(listing)
    assert len(rest) > 100


def test_unknown_source_id_fails_that_document_only(source: ADSource) -> None:
    good = DocumentRef("AD_Window:123", "en_US", "v")
    bad = DocumentRef("AD_Nothing:1", "en_US", "v")
    gone = DocumentRef("AD_Window:999999999", "en_US", "v")
    results = list(source.fetch([good, bad, gone]))
    assert [type(r).__name__ for r in results] == ["FailedDocument", "SourceDocument"]


def test_known_answers_from_the_dictionary(demo_url: str) -> None:
    with psycopg.connect(demo_url) as conn:
        cases = build_known_answers(conn, windows=10, processes=5)
    assert len(cases) == 15
    assert len({c.expected_source_id for c in cases}) == 15
    assert all(len(c.query.split()) >= 3 for c in cases)
    answers = {c.query: c.expected_source_id for c in cases}

    def perfect(query: str, top_k: int) -> list[tuple[str, str]]:
        return [("ad_metadata", "AD_Window:1"), ("ad_metadata", answers[query])][:top_k]

    score = score_known_answers(cases, perfect, top_k=5)
    assert (score.hits, score.hit_rate, score.mean_reciprocal_rank) == (15, 1.0, 0.5)
    with psycopg.connect(demo_url) as conn:
        spanish = build_known_answers(conn, windows=10, processes=0, language="es_CO")
    # The query is the translated description; the answer is the same window.
    assert ("Entrar Inventario Físico", "AD_Window:168") in {
        (c.query, c.expected_source_id) for c in spanish
    }
    blind = score_known_answers(cases, lambda q, k: [], top_k=5)
    assert blind.hits == 0
    assert len(blind.misses) == 15
    assert isinstance(blind.misses[0], KnownAnswer)
