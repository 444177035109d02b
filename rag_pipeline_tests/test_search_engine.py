"""Hybrid search on a real PostgreSQL + pgvector with the real model: modes, filters, dedup,
identifiers, Spanish, bad input and the connection pool."""

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from numpy.typing import NDArray

from rag_pipeline.core.embedding import Embedder
from rag_pipeline.core.words import detect_language, request_words
from rag_pipeline.search import QueryError, Searcher, SearchHit
from rag_pipeline.search.identifiers import query_identifiers
from rag_pipeline.search.query import MAX_QUERY_CHARS, prepare_query
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline_tests import search_fixtures
from rag_pipeline_tests.search_corpus import (
    COUNTING,
    EVENTS,
    INVOICE_ES,
    ORDERS_EN,
    ORDERS_ES,
    PARTNERS,
    PRICES,
    WAREHOUSE,
)
from rag_pipeline_tests.search_support import Doc, index_documents

indexed_db = search_fixtures.indexed_db  # the shared module-scoped fixture

MODES = ("hybrid", "vector", "keyword")


def _settings(rag_home: Path, url: str, **overrides: object) -> Settings:
    return load_settings(home=rag_home, vectordb_url=url, **overrides)


@pytest.fixture(scope="module")
def searcher(rag_home: Path, indexed_db: str, embedder: Embedder) -> Searcher:
    return Searcher(_settings(rag_home, indexed_db), embedder=embedder, conninfo=indexed_db)


def ids(hits: list[SearchHit]) -> list[str]:
    return [hit.source_id for hit in hits]


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_finds_the_section_that_answers(searcher: Searcher, mode: str) -> None:
    hits = searcher.search("aisle bin and level of a locator in the warehouse", mode=mode)  # type: ignore[arg-type]
    assert hits[0].source_id == WAREHOUSE.source_id
    assert hits[0].section_title == "Locators"
    assert "aisle (X)" in hits[0].text
    assert "default locator" in hits[0].parent_text
    # A document's further sections follow every document's first (sections_per_document=1);
    # "Storage" is one since issue 47 (it was folded into "Locators").
    firsts = [h for i, h in enumerate(hits) if h.source_id not in ids(hits[:i])]
    assert hits[: len(firsts)] == firsts
    for group in (firsts, hits[len(firsts) :]):
        assert [h.score for h in group] == sorted((h.score for h in group), reverse=True)


def test_hybrid_scores_are_fused_and_explained(searcher: Searcher) -> None:
    hits = searcher.search("where is stock kept in a warehouse", explain=True, top_k=5)
    assert 0 < hits[0].score <= 1
    legs = hits[0].explain
    assert legs is not None
    assert legs.vector_rank is not None
    assert legs.vector_score is not None
    assert legs.keyword_rank is not None
    assert legs.keyword_score is not None
    assert searcher.search("where is stock kept", top_k=1)[0].explain is None
    vector_only = searcher.search("where is stock kept", mode="vector", explain=True)
    assert all(h.explain and h.explain.keyword_rank is None for h in vector_only)


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize(
    ("query", "expected", "verbatim"),
    [
        ("M_Locator", WAREHOUSE, "M_Locator"),
        ("C_BPartner_ID", PARTNERS, "C_BPartner_ID"),
        # Inside a longer snake_case identifier, and inside camelCase.
        ("M_AttributeSetInstance", EVENTS, "M_AttributeSetInstance_ID"),
        ("DocStatus", EVENTS, "getDocStatus"),
        ("which table is M_Locator", WAREHOUSE, "M_Locator"),
    ],
)
def test_identifiers_are_found_verbatim_and_inside_others(
    searcher: Searcher, mode: str, query: str, expected: Doc, verbatim: str
) -> None:
    hits = searcher.search(query, mode=mode, top_k=3)  # type: ignore[arg-type]
    assert hits[0].source_id == expected.source_id
    assert verbatim in hits[0].text


def test_query_identifiers_match_the_database_rules(indexed_db: str) -> None:
    samples = ["C_BPartner_ID", "M_Locator", "getDocStatus", "MLocator", "AD_Window_ID", "x_1"]
    with psycopg.connect(indexed_db) as conn:
        for sample in samples:
            row = conn.execute("SELECT rag.identifier_terms(%s)", (sample,)).fetchone()
            assert row is not None
            indexed = set(row[0].split())
            assert set(query_identifiers(sample)) <= indexed, sample
    assert query_identifiers("where is C_BPartner_ID and M_Locator") == ["cbpartnerid", "mlocator"]
    assert query_identifiers("plain words only") == []


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_spanish_query_reaches_spanish_documents(searcher: Searcher, mode: str) -> None:
    query = "¿Cómo modifico las órdenes de venta de un cliente?"
    assert prepare_query(query).ts_config == "spanish"
    hits = searcher.search(query, mode=mode, top_k=3)  # type: ignore[arg-type]
    assert hits[0].source_id == ORDERS_ES.source_id
    assert hits[0].language == "es_CO"
    facturas = searcher.search("generar facturas desde una entrega", mode=mode, top_k=3)  # type: ignore[arg-type]
    assert facturas[0].source_id == INVOICE_ES.source_id


def test_language_detection() -> None:
    assert detect_language("how do I close a period") == "en_US"
    assert detect_language("¿cómo cierro un periodo?") == "es_CO"
    assert detect_language("cerrar el periodo contable de la empresa") == "es_CO"
    assert detect_language("Ako zatvoriť obdobie") == "sk_SK"
    assert detect_language("hogyan zárom le az időszakot") == "hu_HU"
    assert detect_language("M_Locator") == "en_US"


@pytest.mark.parametrize(
    ("query", "language"),
    [
        # no telling letters or function words: the words' own language decides
        ("activo fijo", "es_CO"),
        ("calcular mrp", "es_CO"),
        ("caja menor", "es_CO"),
        ("price list", "en_US"),
        ("Business Partner", "en_US"),
        # words common in both stay English
        ("balance general", "en_US"),
        ("xyzzy", "en_US"),
    ],
)
def test_a_query_without_function_words_is_read_in_its_words_language(
    query: str, language: str
) -> None:
    assert detect_language(query) == language


@pytest.mark.parametrize("mode", MODES)
def test_filters_are_applied_in_sql(searcher: Searcher, mode: str) -> None:
    query = "sales orders of customers"
    spanish = searcher.search("órdenes de venta", mode=mode, languages=["es_CO"])  # type: ignore[arg-type]
    assert spanish
    assert {h.language for h in spanish} == {"es_CO"}
    by_prefix = searcher.search("órdenes de venta", mode=mode, languages=["es"])  # type: ignore[arg-type]
    assert by_prefix == spanish
    english = searcher.search(query, mode=mode, languages=["en"])  # type: ignore[arg-type]
    assert english
    assert {h.language for h in english} == {"en_US"}
    assert searcher.search(query, mode=mode, source_types=["wiki"]) == []  # type: ignore[arg-type]
    materials = searcher.search("price lists and locators", mode=mode, breadcrumb="Guides / Mat")  # type: ignore[arg-type]
    assert materials
    assert {h.source_id for h in materials} <= {
        WAREHOUSE.source_id,
        PRICES.source_id,
        COUNTING.source_id,
    }
    assert all(h.breadcrumb.startswith("Guides / Mat") for h in materials)
    scores = [h.score for h in searcher.search(query, mode=mode, top_k=10)]  # type: ignore[arg-type]
    threshold = scores[len(scores) // 2]
    kept = searcher.search(query, mode=mode, top_k=10, min_score=threshold)  # type: ignore[arg-type]
    assert kept
    assert all(h.score >= threshold for h in kept)
    assert len(kept) < len(scores)


@pytest.mark.parametrize("mode", MODES)
def test_one_hit_per_parent_section(searcher: Searcher, mode: str) -> None:
    hits = searcher.search("stock count of every product in an aisle", mode=mode, top_k=10)  # type: ignore[arg-type]
    sections = [h.section_id for h in hits]
    assert len(sections) == len(set(sections))
    assert hits[0].source_id == COUNTING.source_id
    assert sum(h.source_id == COUNTING.source_id for h in hits) == 1


def test_expand_chunk_returns_no_parent_text(searcher: Searcher) -> None:
    hit = searcher.search("aisle bin level", top_k=1, expand="chunk")[0]
    assert hit.parent_text == ""
    assert hit.text


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "empty"),
        ("   \n\t ", "empty"),
        ("\x00\x00", "empty"),
        ("\ud800", "empty"),
        ("x" * (MAX_QUERY_CHARS + 1), "at most"),
    ],
)
def test_bad_queries_are_a_clear_value_error(searcher: Searcher, query: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        searcher.search(query)


def test_odd_characters_are_sanitized_like_documents(searcher: Searcher) -> None:
    assert prepare_query("M_Locator\x00 aisle\ud800").text == "M_Locator aisle\ufffd"
    assert searcher.search("M_Locator\x00\ud800", top_k=1)[0].source_id == WAREHOUSE.source_id
    # Nothing the keyword leg knows, but the vector leg always has a nearest section.
    assert len(searcher.search("x" * MAX_QUERY_CHARS, top_k=1)) == 1


def test_bad_arguments_are_value_errors(searcher: Searcher) -> None:
    with pytest.raises(ValueError, match="mode"):
        searcher.search("locator", mode="semantic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="top_k"):
        searcher.search("locator", top_k=0)


def test_the_pool_serves_32_concurrent_threads(
    rag_home: Path, indexed_db: str, embedder: Embedder
) -> None:
    small = Searcher(
        _settings(rag_home, indexed_db, search_pool_size=4),
        embedder=embedder,
        conninfo=indexed_db,
    )
    queries = ["aisle bin level", "C_BPartner_ID", "órdenes de venta", "month-end closing"]
    expected = {q: ids(small.search(q, top_k=3)) for q in queries}
    results: list[tuple[str, list[str]]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        try:
            for i in range(3):
                query = queries[(n + i) % len(queries)]
                found = ids(small.search(query, top_k=3))
                with lock:
                    results.append((query, found))
        except BaseException as exc:
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(results) == 96
    assert all(found == expected[query] for query, found in results)
    with psycopg.connect(indexed_db) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = '' AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    assert row[0] <= 4 + 8  # this pool and the module searcher's default-sized one


def test_searches_survive_a_server_restart(
    rag_home: Path, indexed_db: str, embedder: Embedder
) -> None:
    searcher = Searcher(
        _settings(rag_home, indexed_db, search_pool_size=2),
        embedder=embedder,
        conninfo=indexed_db,
    )
    before = ids(searcher.search("aisle bin level", top_k=3))
    # What a restart does to pooled connections: the server ends every one of them.
    with psycopg.connect(indexed_db, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    assert ids(searcher.search("aisle bin level", top_k=3)) == before


def test_new_chunks_update_the_keyword_statistics(
    database_url: str, rag_home: Path, embedder: Embedder
) -> None:
    index_documents(database_url, [WAREHOUSE, PARTNERS, ORDERS_EN], embedder)
    searcher = Searcher(_settings(rag_home, database_url), embedder=embedder, conninfo=database_url)
    assert searcher.search("price list versions", mode="keyword") == []
    index_documents(database_url, [PRICES], embedder)
    searcher.refresh_stats()
    hits = searcher.search("price list versions", mode="keyword")
    assert hits[0].source_id == PRICES.source_id
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT chunks FROM rag.search_stats").fetchone()
        count = conn.execute("SELECT count(*) FROM rag.chunks").fetchone()
    assert row is not None
    assert count is not None
    assert row[0] == count[0]


def test_the_light_query_encoder_gives_the_models_vectors(
    rag_home: Path, embedder: Embedder
) -> None:
    from rag_pipeline.search.encoder import BundledQueryEncoder, load_query_embedder

    encoder = load_query_embedder(load_settings(home=rag_home))
    assert isinstance(encoder, BundledQueryEncoder)
    assert encoder.model_id == embedder.model_id
    for query in ["how do I create a locator", "C_BPartner_ID", "órdenes de venta", "x " * 700]:
        assert float(encoder.embed_query(query) @ embedder.embed_query(query)) > 0.9999


@pytest.mark.parametrize("fusion", ["tmm", "minmax", "rrf"])
def test_every_fusion_ranks_the_answer_first(searcher: Searcher, fusion: str) -> None:
    hits = searcher.search("which table holds the locator of a warehouse", fusion=fusion)  # type: ignore[arg-type]
    assert hits[0].source_id == WAREHOUSE.source_id
    # Min-max gives a leg's weakest candidate 0: scores lie in [0, 1], the best above 0.
    assert all(0 <= h.score <= 1 + 1e-9 for h in hits)
    assert hits[0].score > 0


def test_the_module_search_function_uses_the_environment(
    monkeypatch: pytest.MonkeyPatch, rag_home: Path, indexed_db: str
) -> None:
    from rag_pipeline.search import engine, search

    monkeypatch.setenv("RAG_HOME", str(rag_home))
    monkeypatch.setenv("RAG_VECTORDB_URL", indexed_db)
    monkeypatch.setattr(engine, "_default", None)
    hits = search("C_BPartner_ID", top_k=2, mode="keyword", explain=True)
    assert hits[0].source_id == PARTNERS.source_id
    assert hits[0].explain is not None
    assert search("C_BPartner_ID", top_k=1, source_types=["wiki"]) == []


def test_a_query_the_model_does_not_speak_leans_on_the_keyword_leg(
    rag_home: Path, indexed_db: str, embedder: Embedder
) -> None:
    english_model = Searcher(_settings(rag_home, indexed_db), embedder=embedder)
    assert english_model.understanding.vector_weight("en_US") == 1.0
    assert english_model.understanding.vector_weight("es_CO") == 0.25
    multilingual = Searcher(
        _settings(rag_home, indexed_db, search_model_languages="*"), embedder=embedder
    )
    assert multilingual.understanding.vector_weight("es_CO") == 1.0


def test_language_versions_of_a_document_are_one_hit_in_the_querys_language(
    rag_home: Path, database_url: str, embedder: Embedder
) -> None:
    # One window in two languages, the Spanish one partly an untranslated copy (as the
    # dictionary's translation fallback makes them), beside another window.
    english = Doc(
        "ad_metadata",
        "AD_Window:141",
        "Payment Term",
        "# Payment Term\n\nMaintain payment terms: net days and discounts for early payment.\n",
    )
    spanish = Doc(
        "ad_metadata",
        "AD_Window:141",
        "Término de Pago",
        "# Término de Pago\n\nMantener términos de pago: días netos y descuentos por pronto "
        "pago. Maintain payment terms: net days and discounts for early payment.\n",
        language="es_CO",
    )
    other = Doc(
        "ad_metadata",
        "AD_Window:233",
        "Discount Schema",
        "# Discount Schema\n\nDiscounts on prices and quantity breaks.\n",
    )
    index_documents(database_url, [english, spanish, other], embedder)
    searcher = Searcher(_settings(rag_home, database_url), embedder=embedder)

    for mode in MODES:
        hits = searcher.search("net days and discount for early payment", mode=mode, top_k=5)  # type: ignore[arg-type]
        versions = [(h.source_id, h.language) for h in hits if h.source_id == "AD_Window:141"]
        assert versions == [("AD_Window:141", "en_US")], mode
    spanish_hits = searcher.search("términos de pago con descuento por pronto pago", top_k=5)
    assert (spanish_hits[0].source_id, spanish_hits[0].language) == ("AD_Window:141", "es_CO")
    assert sum(h.source_id == "AD_Window:141" for h in spanish_hits) == 1
    # A language filter still reaches the other version.
    only_spanish = searcher.search("net days", languages=["es"], top_k=5)
    assert [(h.source_id, h.language) for h in only_spanish] == [("AD_Window:141", "es_CO")]


@pytest.fixture(scope="module")
def titled_db(pg_admin_uri: str, embedder: Embedder) -> Iterator[str]:
    """Dictionary-like windows whose names join words with slashes, contain each other or
    carry accents."""
    # Shaped like the dictionary's pages: the window of the name has a long help text, the
    # import process of nearly the same name only a line, which BM25 favours.
    price_list_help = (
        "The window lets you build product price lists for your business partners. A list "
        "decides the currency and the tax treatment of the prices. Versions of a list keep "
        "parallel prices for different date ranges, and the newest version valid on the "
        "document date is used. Every version holds three prices per product: list, "
        "standard and limit. Start with a base list, enter products and prices by hand or "
        "let them be created, then derive other lists from it with a schema of discounts."
    )
    docs = [
        Doc(
            "files",
            "ad/window/194.md",
            "Bank/Cash Statement",
            "# Bank/Cash Statement\n\nReconcile what the bank reported.\n",
        ),
        Doc(
            "files",
            "ad/window/146.md",
            "Price List",
            f"# Price List\n\nMaintain product price lists.\n\n{price_list_help}\n",
        ),
        Doc(
            "files",
            "ad/process/53163.md",
            "Import Price Lists",
            "# Import Price Lists\n\nImports price lists from a file into the application.\n",
        ),
        Doc(
            "files",
            "ad/window/200119.es_CO.md",
            "Facturación Electrónica",
            "# Facturación Electrónica\n\nConfigurar la facturación electrónica y sus "
            "categorías de documentos.\n",
            language="es_CO",
        ),
        Doc(
            "files",
            "ad/window/53198.es_CO.md",
            "Dónde se Usa",
            "# Dónde se Usa\n\nMuestra dónde se usa un producto o componente.\n",
            language="es_CO",
        ),
        Doc(
            "files",
            "ad/window/337.md",
            "Price List Schema",
            "# Price List Schema\n\nMaintain price list schema: the calculation rules for "
            "price lists.\n",
        ),
    ]
    with search_fixtures.indexed_database(pg_admin_uri, docs, embedder) as url:
        yield url


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_words_joined_by_a_slash_are_found_alone(
    rag_home: Path, titled_db: str, embedder: Embedder, mode: str
) -> None:
    searcher = Searcher(_settings(rag_home, titled_db), embedder=embedder)
    hits = searcher.search("cash", mode=mode, top_k=3)  # type: ignore[arg-type]
    assert [h.source_id for h in hits][:1] == ["ad/window/194.md"]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_query_that_is_a_title_finds_that_document_first(
    rag_home: Path, titled_db: str, embedder: Embedder, mode: str
) -> None:
    searcher = Searcher(_settings(rag_home, titled_db), embedder=embedder)
    hits = searcher.search("price list", mode=mode, top_k=3, explain=True)  # type: ignore[arg-type]
    assert hits[0].source_id == "ad/window/146.md"
    # The other windows, whose bodies say "price list" more often, follow.
    assert {h.source_id for h in hits[1:]} == {"ad/process/53163.md", "ad/window/337.md"}


@pytest.mark.parametrize("query", ["facturacion electronica", "categorias de la facturacion"])
def test_spanish_typed_without_accents_finds_the_accented_text(
    rag_home: Path, titled_db: str, embedder: Embedder, query: str
) -> None:
    searcher = Searcher(_settings(rag_home, titled_db), embedder=embedder)
    hits = searcher.search(query, mode="keyword", top_k=3)
    assert [h.source_id for h in hits][:1] == ["ad/window/200119.es_CO.md"]
    # Typed with them, the stemmed words match as before.
    accented = searcher.search("facturación electrónica", mode="keyword", top_k=3)
    assert accented[0].source_id == "ad/window/200119.es_CO.md"


@pytest.mark.parametrize("query", ["Facturación Electrónica", "facturacion electronica"])
def test_a_title_typed_with_or_without_its_accents_finds_that_title_first(
    rag_home: Path, pg_admin_uri: str, embedder: Embedder, query: str
) -> None:
    # The process says "facturación electrónica" more often, in its title too, than the
    # window of that name.
    window = Doc(
        "files",
        "ad/window/200119.es_CO.md",
        "Facturación Electrónica",
        "# Facturación Electrónica\n\nConfigurar el proveedor y los certificados. La "
        "ventana guarda la dirección del servicio, el usuario y la clave de la empresa, el "
        "certificado de firma con su fecha de vencimiento, el ambiente de pruebas o de "
        "producción y los tipos de documento que se envían, con la resolución de numeración "
        "autorizada, su prefijo, el rango de números y las fechas en que es válida.\n",
        language="es_CO",
    )
    process = Doc(
        "files",
        "ad/process/200200.es_CO.md",
        "Enviar Facturación Electrónica",
        "# Enviar Facturación Electrónica\n\nEnvía la facturación electrónica pendiente: "
        "cada factura de la facturación electrónica se firma y la facturación electrónica "
        "rechazada se reintenta.\n",
        language="es_CO",
    )
    with search_fixtures.indexed_database(pg_admin_uri, [process, window], embedder) as url:
        searcher = Searcher(_settings(rag_home, url), embedder=embedder)
        hits = searcher.search(query, mode="keyword", top_k=2)
        assert [h.source_id for h in hits] == [window.source_id, process.source_id]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_of_titles_with_the_same_words_the_one_typed_goes_first(
    rag_home: Path, pg_admin_uri: str, embedder: Embedder, mode: str
) -> None:
    # "BOM" and "BOMs" stem alike: both titles are exactly the query's words.
    one = Doc(
        "ad_metadata",
        "AD_Process:136",
        "Verify BOM",
        "# Verify BOM\n\nVerify the bill of materials of one product.\n",
        metadata={"entity_type": "process"},
    )
    every = Doc(
        "ad_metadata",
        "AD_Process:346",
        "Verify BOMs",
        "# Verify BOMs\n\nVerify BOMs: verify the BOM of every product, each BOM's lines and "
        "the BOM's components.\n",
        metadata={"entity_type": "process"},
    )
    with search_fixtures.indexed_database(pg_admin_uri, [one, every], embedder) as url:
        searcher = Searcher(_settings(rag_home, url), embedder=embedder)
        for query, first in (("Verify BOM", one), ("verify boms", every), ("Verify BOMs", every)):
            hits = searcher.search(query, mode=mode)  # type: ignore[arg-type]
            assert hits[0].source_id == first.source_id, query


def _process(number: int, title: str, body: str) -> Doc:
    """A dictionary process titled `title`, its page the title as heading and `body`."""
    text = f"# {title}\n\n{body}\n"
    return Doc(
        "ad_metadata", f"AD_Process:{number}", title, text, metadata={"entity_type": "process"}
    )


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_hyphenated_title_is_still_read_as_the_query_it_equals(
    rag_home: Path, pg_admin_uri: str, embedder: Embedder, mode: str
) -> None:
    # "Re-Open" is two words but three lexemes (re-open, re, open): a title too short for the
    # query's lexemes is skipped, and this one must not be.
    title = _process(
        900,
        "Re-Open",
        "Set a closed document back to in progress: its lines can be changed again, its "
        "quantities and prices corrected, and it is completed once more when the changes are "
        "done. Posted documents are reversed first; a document that was paid, shipped or "
        "received keeps its allocations, shipments and receipts as they were.",
    )
    body = _process(901, "Re-Open Period", "Re-open a period: re-open it, re-open it again.")
    others = [
        _process(910 + n, name, f"{name} for the current period and organization.")
        for n, name in enumerate(["Close Period", "Post Invoices", "Print Checks", "Verify BOM"])
    ]
    with search_fixtures.indexed_database(pg_admin_uri, [body, title, *others], embedder) as url:
        searcher = Searcher(_settings(rag_home, url), embedder=embedder)
        hits = searcher.search("re-open", mode=mode)  # type: ignore[arg-type]
        assert hits[0].source_id == title.source_id


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_query_that_is_a_users_name_for_a_title_finds_that_title_first(
    rag_home: Path, pg_admin_uri: str, embedder: Embedder, mode: str
) -> None:
    # iDempiere's es_CO name for a fixed asset is "Activo"; the import window says "activos
    # fijos" in its title and all through its body.
    asset = Doc(
        "ad_metadata",
        "AD_Window:251",
        "Activo",
        "# Activo\n\nActivo usado internamente o por clientes. Un activo es creado comprando o "
        "entregando un producto.\n",
        language="es_CO",
        metadata={"entity_type": "window"},
    )
    imported = Doc(
        "ad_metadata",
        "AD_Window:53120",
        "Importación Activos Fijos",
        "# Importación Activos Fijos\n\nImporta activos fijos desde un archivo: cada línea "
        "trae los activos fijos con su grupo de activos fijos, su vida útil y su valor.\n",
        language="es_CO",
        metadata={"entity_type": "window"},
    )
    revaluation = Doc(
        "ad_metadata",
        "AD_Window:53045",
        "Indice Revaluación Activo",
        "# Indice Revaluación Activo\n\nÍndices para revaluar los activos fijos de la "
        "empresa, activo por activo.\n",
        language="es_CO",
        metadata={"entity_type": "window"},
    )
    with search_fixtures.indexed_database(
        pg_admin_uri, [imported, revaluation, asset], embedder
    ) as url:
        query = "activos fijos"
        plain = Searcher(_settings(rag_home, url, search_vocabulary_weight=0), embedder=embedder)
        # Without the vocabulary the titles that say the query's words come first: the premise.
        assert plain.search(query, mode=mode)[0].source_id != asset.source_id  # type: ignore[arg-type]
        searcher = Searcher(_settings(rag_home, url), embedder=embedder)
        hits = searcher.search(query, mode=mode)  # type: ignore[arg-type]
        assert hits[0].source_id == asset.source_id
        # A question about assets is not a name: the import window keeps its place.
        asked = searcher.search("importar activos fijos desde excel", mode=mode)  # type: ignore[arg-type]
        assert asked[0].source_id == imported.source_id


def test_a_spanish_query_finds_an_english_only_page_by_the_words_they_share(
    rag_home: Path, pg_admin_uri: str, embedder: Embedder
) -> None:
    # Spanish stems "réplica" to 'replic', English keeps 'replica': the same word, two lexemes.
    page = Doc(
        "files",
        "wiki/read-only-replica.md",
        "Reporting from a read-only replica",
        "# Reporting from a read-only replica\n\nHeavy reports can run against a replica "
        "database instead of the main one.\n",
    )
    window = Doc(
        "ad_metadata",
        "AD_Window:284",
        "Replicación",
        "# Replicación\n\nDefinir la replicación de datos entre servidores.\n",
        language="es_CO",
        metadata={"entity_type": "window"},
    )
    with search_fixtures.indexed_database(pg_admin_uri, [page, window], embedder) as url:
        searcher = Searcher(_settings(rag_home, url), embedder=embedder)
        hits = searcher.search("réplica de la base de datos", mode="keyword", language="es_CO")
        assert page.source_id in [h.source_id for h in hits]
        # An English query is read in English only, as before.
        english = searcher.search("replicación", mode="keyword", language="en_US")
        assert page.source_id not in [h.source_id for h in english]


def test_the_query_language_decides_which_version_of_a_translated_entry_matches_a_word(
    rag_home: Path, pg_admin_uri: str, embedder: Embedder
) -> None:
    # "red" is English for a colour and Spanish for a network: the Spanish title "Red de
    # Distribución" used to be the first hit of an English question about red fields.
    def versions(source_id: str, english: tuple[str, str], spanish: tuple[str, str]) -> list[Doc]:
        return [
            Doc(
                "ad_metadata",
                source_id,
                title,
                f"# {title}\n\n{text}\n",
                language=language,
                metadata={"entity_type": "window"},
            )
            for language, (title, text) in (("en_US", english), ("es_CO", spanish))
        ]

    network = versions(
        "AD_Window:53018",
        ("Distribution Network", "Supply relations between warehouses."),
        ("Red de Distribución", "Relaciones de suministro entre almacenes de la red."),
    )
    style = versions(
        "AD_Window:200086",
        ("Field Style", "Show a field in red or in bold: its style."),
        ("Estilo de Campo", "Mostrar un campo en color o negrita: su estilo."),
    )
    with search_fixtures.indexed_database(pg_admin_uri, network + style, embedder) as url:
        searcher = Searcher(_settings(rag_home, url), embedder=embedder)
        english = searcher.search("red", mode="keyword", language="en_US")
        assert [(h.source_id, h.language) for h in english] == [
            ("AD_Window:200086", "en_US"),
            ("AD_Window:53018", "es_CO"),
        ]
        spanish = searcher.search("red", mode="keyword", language="es_CO")
        assert [h.source_id for h in spanish] == ["AD_Window:53018", "AD_Window:200086"]


def test_a_spanish_question_word_typed_with_its_accent_is_a_stop_word(
    rag_home: Path, titled_db: str, embedder: Embedder
) -> None:
    # Spanish's stop words are "donde", "como", "que": written "¿Dónde ...?", the question word
    # used to match every title that starts with it.
    searcher = Searcher(_settings(rag_home, titled_db), embedder=embedder)
    hits = searcher.search("¿Dónde configuro la facturación electrónica?", mode="keyword")
    assert [h.source_id for h in hits] == ["ad/window/200119.es_CO.md"]
    assert searcher.search("¿Dónde?", mode="keyword") == []


def test_spanish_words_english_would_stop_do_not_decide_a_keyword_match(
    rag_home: Path, pg_admin_uri: str, embedder: Embedder
) -> None:
    # "solo" (only) and "propia" (own) are stop words in English, not in Spanish: "solo" and
    # "solamente" stem alike, so every help text saying "solamente" matched a question about
    # branches ("sucursal") and, in a long question, could outrank the text about them.
    def window(source_id: str, title: str, text: str) -> Doc:
        return Doc(
            "ad_metadata",
            source_id,
            title,
            f"# {title}\n\n{text}\n",
            language="es_CO",
            metadata={"entity_type": "window"},
        )

    access = window("AD_Window:268", "Acceso a Datos", "Restringe los datos por sucursal.")
    fillers = [
        window(f"AD_Window:{101 + n}", title, f"Es solamente para uso propio del {title.lower()}.")
        for n, title in enumerate(["Referencia", "Menú", "Mensaje", "Color"])
    ]
    with search_fixtures.indexed_database(pg_admin_uri, [access, *fillers], embedder) as url:
        searcher = Searcher(_settings(rag_home, url), embedder=embedder)
        hits = searcher.search(
            "Que cada sucursal solo vea su propia información", mode="keyword", language="es_CO"
        )
        assert [h.source_id for h in hits] == [access.source_id]
        # Alone, such a word is searched as typed.
        alone = searcher.search("solamente", mode="keyword", language="es_CO")
        assert len(alone) == len(fillers)


def test_the_vocabulary_finds_what_a_query_calls_by_another_name(
    rag_home: Path, indexed_db: str, embedder: Embedder
) -> None:
    searcher = Searcher(_settings(rag_home, indexed_db), embedder=embedder)
    # No document says "supplier"; the bundled vocabulary adds "business partner vendor".
    for mode in MODES:
        hits = searcher.search("supplier", mode=mode, top_k=3)  # type: ignore[arg-type]
        assert ids(hits)[:1] == [PARTNERS.source_id], mode
    # Weight 0 turns the vocabulary off.
    off = Searcher(_settings(rag_home, indexed_db, search_vocabulary_weight=0), embedder=embedder)
    assert off.search("supplier", mode="keyword") == []
    assert off.expansion(prepare_query("supplier")) == ""


def test_added_words_weigh_less_than_typed_ones(
    rag_home: Path, indexed_db: str, embedder: Embedder, tmp_path: Path
) -> None:
    (tmp_path / "en.tsv").write_text(
        "gangway\taisle\ncounterparty\tcustomer employee\n", encoding="utf-8"
    )
    settings = _settings(rag_home, indexed_db, search_vocabulary_dir=tmp_path)
    searcher = Searcher(settings, embedder=embedder)

    def score(query: str, doc: Doc) -> float:
        hits = searcher.search(query, mode="keyword", top_k=20)
        return next(h.score for h in hits if h.source_id == doc.source_id)

    # One word for one: the added word counts RAG_SEARCH_VOCABULARY_WEIGHT (0.75) of typed.
    assert score("gangway", WAREHOUSE) == pytest.approx(0.75 * score("aisle", WAREHOUSE))
    # One word for two: the two share that weight.
    assert score("counterparty", PARTNERS) == pytest.approx(
        0.375 * score("customer employee", PARTNERS)
    )


def test_an_entry_tagged_en_reads_its_words_as_english_for_a_spanish_query(
    rag_home: Path, database_url: str, embedder: Embedder, tmp_path: Path
) -> None:
    # The wiki is English only: a Spanish word must find "compatibility", which Spanish stems
    # as 'compatibility' and English as 'compat'.
    docs = [
        Doc(
            "files",
            "mobile.md",
            "Mobile Compatibility",
            "# Mobile Compatibility\n\nCompatibility of the web client with small screens.\n",
        ),
        Doc("files", "tax.md", "Tax Rate", "# Tax Rate\n\nThe rate of each tax category.\n"),
    ]
    index_documents(database_url, docs, embedder)
    # "ladrillo" (an old phone, in slang) is in no bundled vocabulary file.
    query = "¿el sistema funciona en el ladrillo?"
    for tag in ("", "[en] "):
        (tmp_path / "es.tsv").write_text(f"ladrillo\t{tag}compatibility\n", encoding="utf-8")
        searcher = Searcher(
            _settings(rag_home, database_url, search_vocabulary_dir=tmp_path), embedder=embedder
        )
        hits = searcher.search(query, mode="keyword", language="es_CO")
        assert ids(hits) == (["mobile.md"] if tag else []), tag
    # `rag search --explain` shows the tag; the vector leg reads the words without it.
    assert searcher.expansion(prepare_query(query, "es_CO")) == "[en] compatibility"


def test_the_words_a_question_asks_with_weigh_less_than_what_it_asks_for(
    rag_home: Path, database_url: str, embedder: Embedder
) -> None:
    # "create" and "new" fill the dictionary's titles; "warehouse" is what the user wants.
    docs = [
        Doc(
            "files",
            "ad/process/200118.md",
            "Create New Window",
            "# Create New Window\n\nCreate a new window, its tabs and new fields from a table.\n",
        ),
        Doc(
            "files",
            "ad/window/139.md",
            "Warehouse",
            "# Warehouse\n\nMaintain each warehouse and its locators.\n",
        ),
    ]
    index_documents(database_url, docs, embedder)
    searcher = Searcher(_settings(rag_home, database_url), embedder=embedder)
    hits = searcher.search("how do I create a new warehouse", mode="keyword")
    assert [h.source_id for h in hits] == ["ad/window/139.md", "ad/process/200118.md"]
    # Spanish has its own list; a language without one weighs every word alike.
    assert "registro" in request_words("es_CO").split()
    assert request_words("hu_HU") == ""


def test_the_keyword_scan_keeps_every_chunk_of_the_rarest_word(
    rag_home: Path, database_url: str, embedder: Embedder
) -> None:
    # Twelve chunks of a common word, then the one chunk that also has a rare word. With a
    # scan budget of 5, the common word's chunks cannot all be scored: the rare word's must be.
    docs = [
        Doc("files", f"common/{i:02}.md", f"Note {i}", f"# Note {i}\n\nThe warehouse note {i}.\n")
        for i in range(12)
    ]
    docs.append(
        Doc("files", "rare.md", "Zebra", "# Zebra\n\nThe warehouse keeps a zebra crossing.\n")
    )
    index_documents(database_url, docs, embedder)
    searcher = Searcher(_settings(rag_home, database_url), embedder=embedder, keyword_scan=5)

    hits = searcher.search("zebra warehouse", mode="keyword", top_k=3)

    assert hits[0].source_id == "rare.md"


def test_a_query_close_in_meaning_to_a_vocabulary_phrase_takes_its_entry(
    rag_home: Path, database_url: str, embedder: Embedder, tmp_path: Path
) -> None:
    zebra = Doc("files", "zebra.md", "Zebra Tariff", "# Zebra Tariff\n\nRates for zoo animals.\n")
    index_documents(database_url, [zebra, PRICES, PARTNERS, WAREHOUSE], embedder)
    (tmp_path / "en.tsv").write_text("tell me when prices go up\tzebra tariff\n", encoding="utf-8")
    query = "please tell me as soon as the price of something goes up"

    def searcher(**overrides: object) -> Searcher:
        settings = _settings(rag_home, database_url, search_vocabulary_dir=tmp_path, **overrides)
        return Searcher(settings, embedder=embedder)

    on = searcher()
    prepared = prepare_query(query)
    # Not a phrase of the entry as typed, nor its stems together: only the meaning is close.
    assert "zebra" not in on.expansion(prepared)
    similar = on.similar_entry(prepared)
    assert similar is not None
    assert (similar.phrase, similar.expansion) == ("tell me when prices go up", "zebra tariff")
    assert similar.similarity >= 0.8

    def keyword_rank(s: Searcher, mode: str) -> int | None:
        hits = s.search(query, mode=mode, explain=True)  # type: ignore[arg-type]
        found = [h for h in hits if h.source_id == zebra.source_id]
        return found[0].explain.keyword_rank if found and found[0].explain else None

    # Hybrid search reads the entry's words in its keyword leg.
    assert keyword_rank(on, "hybrid") is not None
    # The keyword mode does not embed queries, so it does not; nor does 1 (off), a Spanish
    # query (the model knows English only) or a query of three words.
    assert on.search(query, mode="keyword")
    assert keyword_rank(on, "keyword") is None
    assert keyword_rank(searcher(search_vocabulary_similarity=1), "hybrid") is None
    assert on.similar_entry(prepare_query(query, "es_CO")) is None
    assert on.similar_entry(prepare_query("prices going up")) is None
    # The vectors of the phrase the package does not ship are kept for the next process.
    kept = list((rag_home / "vocabulary-vectors").glob("*-en.npz"))
    assert len(kept) == 1


class _CountingEmbedder:
    """The real model, recording every text it is asked to embed."""

    def __init__(self, model: Embedder) -> None:
        self.model = model
        self.model_id = model.model_id
        self.texts: list[str] = []

    def embed_query(self, query: str) -> NDArray[np.float32]:
        self.texts.append(query)
        return self.model.embed_query(query)


def test_a_query_the_phrase_lookup_embedded_is_not_embedded_again_with_the_cache_off(
    rag_home: Path, database_url: str, embedder: Embedder
) -> None:
    index_documents(database_url, [PRICES, PARTNERS, WAREHOUSE], embedder)
    settings = _settings(rag_home, database_url, search_query_cache_size=0)
    searcher = Searcher(settings, embedder=embedder)
    counting = _CountingEmbedder(embedder)
    searcher.understanding.embedder = counting  # the part that embeds queries
    query = "the zebra crossing in front of the building"
    prepared = prepare_query(query)
    # Long enough, and English: the lookup embeds it; no phrase is close, nothing is added.
    assert searcher.added_words(prepared, "hybrid").for_model == ""
    counting.texts.clear()

    assert searcher.search(query, mode="hybrid")
    assert searcher.search(query, mode="vector")

    assert counting.texts == [prepared.text, prepared.text]
