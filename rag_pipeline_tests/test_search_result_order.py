"""The order of a result list after fusion, on a real database with the real model: a
dictionary field ranks below the window a question names (RAG_SEARCH_ENTITY_WEIGHTS), a process
below a window unless the query asks to run one, an import window or process below what it
imports unless the query asks to import (RAG_SEARCH_IMPORT_WEIGHT), one long page does not
fill the list (RAG_SEARCH_SECTIONS_PER_DOCUMENT), and of two pages whose best sections match
alike the one of fewer sections comes first."""

import json
import math
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from rag_pipeline.cli import main
from rag_pipeline.core.embedding import Embedder
from rag_pipeline.core.words import fold
from rag_pipeline.search import Searcher, SearchHit
from rag_pipeline.settings import ConfigError, load_settings, parse_entity_weights
from rag_pipeline.settings.ranking import Ranking
from rag_pipeline.sources.idempiere.ranking import IMPORT_WORDS, PROCESS_WORDS
from rag_pipeline_tests.search_fixtures import indexed_database
from rag_pipeline_tests.search_support import Doc

MODES = ("hybrid", "vector", "keyword")

# A field whose one line is nearly the query, and the window it belongs to, which says more.
FIELD = Doc(
    "ad_metadata",
    "AD_Field:205796",
    "Bank Account",
    "# Bank Account\n\nThe bank account a bank transfer moves money from.\n",
    breadcrumb="Bank Transfer › Transfer › Bank Account",
    metadata={"entity_type": "field", "window_id": 200105},
)
WINDOW = Doc(
    "ad_metadata",
    "AD_Window:200105",
    "Bank Transfer",
    "# Bank Transfer\n\nTransfer money between two bank or cash accounts of the organization: "
    "the window makes the payment out of one account and into the other.\n",
    metadata={"entity_type": "window"},
)
# Sections long enough not to be merged with their neighbours by the chunker.
_DETAIL = (
    " The mail server is given by its host and port, the account by its user name; "
    "the authorization provider, its client id and its scopes are kept for each account, "
    "and a request that fails is written to the log with the server's answer." * 4
)
# A long page with three sections on mail tokens, and a short one that mentions them once.
LONG_PAGE = Doc(
    "files",
    "wiki/oauth2-mail.md",
    "OAuth2 for EMail",
    "# OAuth2 for EMail\n\n"
    f"## Sending EMail\n\nSending mail through SMTP with an OAuth2 access token.{_DETAIL}\n\n"
    f"## Reading EMail\n\nReading mail through IMAP with an OAuth2 access token.{_DETAIL}\n\n"
    f"## Refreshing the token\n\nThe OAuth2 refresh token renews the mail access token."
    f"{_DETAIL}\n",
)
OTHER_PAGE = Doc(
    "files",
    "wiki/mail-server.md",
    "Mail Server",
    "# Mail Server\n\nThe client's SMTP host, port and user for outgoing mail.\n",
)


@pytest.fixture(scope="module")
def ordered_db(pg_admin_uri: str, embedder: Embedder) -> Iterator[str]:
    with indexed_database(pg_admin_uri, [FIELD, WINDOW, LONG_PAGE, OTHER_PAGE], embedder) as url:
        yield url


def _searcher(rag_home: Path, url: str, embedder: Embedder, **overrides: object) -> Searcher:
    settings = load_settings(home=rag_home, vectordb_url=url, **overrides)
    return Searcher(settings, embedder=embedder)


def _dictionary(hits: list[SearchHit]) -> list[str]:
    return [h.source_id for h in hits if h.source_type == "ad_metadata"]


@pytest.mark.parametrize("mode", MODES)
def test_a_field_ranks_below_its_window_by_the_entity_weight(
    rag_home: Path, ordered_db: str, embedder: Embedder, mode: str
) -> None:
    query = "bank account to transfer money from"
    plain = _searcher(rag_home, ordered_db, embedder, search_entity_weights="")
    unweighted = plain.search(query, mode=mode, source_types=["ad_metadata"])  # type: ignore[arg-type]
    # Unweighted, the field's line is the better match: the test's premise.
    assert _dictionary(unweighted) == [FIELD.source_id, WINDOW.source_id]

    weighted = _searcher(
        rag_home, ordered_db, embedder, search_entity_weights="field=0.5, tab=0.5"
    ).search(query, mode=mode, source_types=["ad_metadata"])  # type: ignore[arg-type]
    assert _dictionary(weighted) == [WINDOW.source_id, FIELD.source_id]
    field_score = {h.source_id: h.score for h in unweighted}[FIELD.source_id]
    assert weighted[1].score == pytest.approx(0.5 * field_score)
    # Documents of no listed entity type keep their score.
    assert weighted[0].score == pytest.approx(unweighted[1].score)


def test_the_default_entity_weights_put_the_window_first(
    rag_home: Path, ordered_db: str, embedder: Embedder
) -> None:
    searcher = _searcher(rag_home, ordered_db, embedder)
    hits = searcher.search("bank account to transfer money from", source_types=["ad_metadata"])
    assert _dictionary(hits) == [WINDOW.source_id, FIELD.source_id]


@pytest.mark.parametrize(
    ("per_document", "expected"),
    [
        (0, [LONG_PAGE, LONG_PAGE, LONG_PAGE, OTHER_PAGE]),
        (1, [LONG_PAGE, OTHER_PAGE, LONG_PAGE, LONG_PAGE]),
        (2, [LONG_PAGE, LONG_PAGE, OTHER_PAGE, LONG_PAGE]),
    ],
)
def test_a_documents_further_sections_follow_the_next_documents(
    rag_home: Path, ordered_db: str, embedder: Embedder, per_document: int, expected: list[Doc]
) -> None:
    searcher = _searcher(rag_home, ordered_db, embedder)
    hits = searcher.search(
        "OAuth2 access token for mail",
        mode="keyword",
        source_types=["files"],
        sections_per_document=per_document,
    )
    assert [h.source_id for h in hits] == [doc.source_id for doc in expected]
    # Within a document, its sections keep their order.
    long_page = [h.score for h in hits if h.source_id == LONG_PAGE.source_id]
    assert long_page == sorted(long_page, reverse=True)


def test_the_setting_gives_the_default_number_of_sections(
    rag_home: Path, ordered_db: str, embedder: Embedder
) -> None:
    query = "OAuth2 access token for mail"
    # By default the first hits are distinct documents.
    default = _searcher(rag_home, ordered_db, embedder)
    hits = default.search(query, mode="keyword", source_types=["files"])
    assert [h.source_id for h in hits][:2] == [LONG_PAGE.source_id, OTHER_PAGE.source_id]
    searcher = _searcher(rag_home, ordered_db, embedder, search_sections_per_document=2)
    hits = searcher.search(query, mode="keyword", source_types=["files"])
    assert [h.source_id for h in hits][:2] == [LONG_PAGE.source_id, LONG_PAGE.source_id]
    with pytest.raises(ValueError, match="sections_per_document"):
        searcher.search("mail", sections_per_document=-1)


# Two pages with the same section on dunning letters; the second has three more sections on
# other things. Indexed in this order, so equal scores would list the long page first.
_DUNNING = (
    "## Dunning letters\n\nDunning letters remind a customer of overdue invoices; each dunning "
    "level prints a stricter letter after more days past the due date." + _DETAIL + "\n\n"
)
_OTHER_TOPICS = ("Kanban boards", "Machine setup", "Shift handover")
MANY_SECTIONS = Doc(
    "files",
    "wiki/collections-guide.md",
    "Collections",
    "# Collections\n\n"
    + _DUNNING
    + "".join(f"## {topic}\n\n{topic} of the shop floor.{_DETAIL}\n\n" for topic in _OTHER_TOPICS),
)
FEW_SECTIONS = Doc("files", "wiki/dunning.md", "Collections", "# Collections\n\n" + _DUNNING)


@pytest.fixture(scope="module")
def pages_db(pg_admin_uri: str, embedder: Embedder) -> Iterator[str]:
    with indexed_database(pg_admin_uri, [MANY_SECTIONS, FEW_SECTIONS], embedder) as url:
        yield url


@pytest.mark.parametrize("mode", MODES)
def test_a_page_of_many_sections_yields_to_one_of_few_that_matches_alike(
    rag_home: Path, pages_db: str, embedder: Embedder, mode: str
) -> None:
    hits = _searcher(rag_home, pages_db, embedder).search(
        "dunning letters for overdue invoices",
        mode=mode,  # type: ignore[arg-type]
    )
    assert [h.source_id for h in hits][:2] == [FEW_SECTIONS.source_id, MANY_SECTIONS.source_id]
    # Both hits are the same dunning section; the long page's score is scaled by its count.
    assert hits[0].text == hits[1].text
    with psycopg.connect(pages_db) as conn:
        row = conn.execute(
            "SELECT count(*) FROM rag.sections s JOIN rag.documents d ON d.id = s.document_id"
            " WHERE d.source_id = %s",
            (MANY_SECTIONS.source_id,),
        ).fetchone()
    sections = row[0] if row else 0
    assert sections >= 4
    assert hits[1].score == pytest.approx(
        hits[0].score * (1 + math.log(sections)) ** -Ranking().sections_exponent
    )


def test_entity_weights_parse_and_bad_ones_name_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert parse_entity_weights(" table=0.8 , field = 0.5,") == {"table": 0.8, "field": 0.5}
    assert parse_entity_weights("") == {}
    for bad in ("field", "field=", "=0.5", "field=much", "field=-1", "field=nan", "tab=101"):
        monkeypatch.setenv("RAG_SEARCH_ENTITY_WEIGHTS", bad)
        with pytest.raises(ConfigError, match="RAG_SEARCH_ENTITY_WEIGHTS"):
            load_settings()


@pytest.mark.parametrize(("option", "second"), [("0", LONG_PAGE), ("1", OTHER_PAGE)])
def test_rag_search_per_document(
    monkeypatch: pytest.MonkeyPatch,
    rag_home: Path,
    ordered_db: str,
    option: str,
    second: Doc,
) -> None:
    monkeypatch.setenv("RAG_HOME", str(rag_home))
    monkeypatch.setenv("RAG_VECTORDB_URL", ordered_db)
    args = ["search", "OAuth2 access token for mail", "--source", "files", "--json"]
    result = CliRunner().invoke(main, [*args, "--mode", "keyword", "--per-document", option])
    assert result.exit_code == 0, result.output
    assert [hit["source_id"] for hit in json.loads(result.output)][1] == second.source_id
    bad = CliRunner().invoke(main, [*args, "--per-document", "-1"])
    assert bad.exit_code == 2
    assert "--per-document" in bad.output


# The window people mean, and the import process that repeats its name and columns.
ASSET = Doc(
    "ad_metadata",
    "AD_Window:251",
    "Asset",
    "# Asset\n\nThe fixed assets used internally or by customers. An asset is created by "
    "purchasing or by delivering a product.\n",
    metadata={"entity_type": "window"},
)
IMPORT_ASSETS = Doc(
    "ad_metadata",
    "AD_Process:53215",
    "Import Fixed Assets",
    "# Import Fixed Assets\n\nImport fixed assets: each fixed asset's name, asset group, "
    "value and the fixed asset's accumulated depreciation.\n",
    metadata={"entity_type": "process"},
)
VENDOR_INVOICE = Doc(
    "ad_metadata",
    "AD_Window:183",
    "Invoice (Vendor)",
    "# Invoice (Vendor)\n\nEnter the invoices your vendors send you.\n",
    metadata={"entity_type": "window"},
)
INVOICE_REPORT = Doc(
    "ad_metadata",
    "AD_Process:133",
    "Monthly Invoice Vendor",
    "# Monthly Invoice Vendor\n\nInvoice report by vendor per month.\n",
    metadata={"entity_type": "process"},
)


IMPORTED_ASSET = Doc(
    "ad_metadata",
    "AD_Window:53120",
    "Imported Fixed Asset",
    "# Imported Fixed Asset\n\nThe fixed asset lines read from a file, before they are imported.\n",
    metadata={"entity_type": "window"},
)
# Spanish "Importe" is an amount, not an import.
AMOUNT = Doc(
    "ad_metadata",
    "AD_Window:1000001",
    "Importe del Pago",
    "# Importe del Pago\n\nEl monto pagado de cada factura.\n",
    language="es_CO",
    metadata={"entity_type": "window"},
)


@pytest.fixture(scope="module")
def kinds_db(pg_admin_uri: str, embedder: Embedder) -> Iterator[str]:
    docs = [ASSET, IMPORT_ASSETS, IMPORTED_ASSET, VENDOR_INVOICE, INVOICE_REPORT, AMOUNT]
    with indexed_database(pg_admin_uri, docs, embedder) as url:
        yield url


def _scores(hits: list[SearchHit]) -> dict[str, float]:
    return {h.source_id: h.score for h in hits}


def test_an_import_ranks_below_what_it_imports(
    rag_home: Path, kinds_db: str, embedder: Embedder
) -> None:
    # Without the vocabulary, which reads "fixed assets" as another name for Asset.
    plain = _searcher(
        rag_home, kinds_db, embedder, search_import_weight=1, search_vocabulary_weight=0
    )
    # Unweighted, the import process's words are the better match: the test's premise.
    imports = {IMPORT_ASSETS.source_id, IMPORTED_ASSET.source_id}
    assert _dictionary(plain.search("fixed assets", mode="keyword"))[0] in imports
    searcher = _searcher(rag_home, kinds_db, embedder, search_vocabulary_weight=0)
    assert _dictionary(searcher.search("fixed assets", mode="keyword"))[0] == ASSET.source_id


@pytest.mark.parametrize("mode", MODES)
def test_the_import_weight_applies_unless_the_query_asks_to_import(
    rag_home: Path, kinds_db: str, embedder: Embedder, mode: str
) -> None:
    plain = _searcher(
        rag_home, kinds_db, embedder, search_entity_weights="", search_import_weight=1
    )
    searcher = _searcher(rag_home, kinds_db, embedder, search_entity_weights="")
    weighted = _scores(searcher.search("fixed assets", mode=mode))  # type: ignore[arg-type]
    unweighted = _scores(plain.search("fixed assets", mode=mode))  # type: ignore[arg-type]
    assert weighted[IMPORT_ASSETS.source_id] == pytest.approx(
        0.8 * unweighted[IMPORT_ASSETS.source_id]
    )
    assert weighted[ASSET.source_id] == pytest.approx(unweighted[ASSET.source_id])
    # Asked to import, the import process weighs the inverse; what it imports keeps its score.
    for query in ("import fixed assets from a CSV file", "cargar activos fijos desde Excel"):
        asked = _scores(searcher.search(query, mode=mode))  # type: ignore[arg-type]
        unasked = _scores(plain.search(query, mode=mode))  # type: ignore[arg-type]
        imports = {IMPORT_ASSETS.source_id, IMPORTED_ASSET.source_id}
        assert asked == pytest.approx(
            {key: score / 0.8 if key in imports else score for key, score in unasked.items()}
        )
        # (A Spanish query finds these English documents by the vector leg only.)
        assert unasked.keys() & imports or (mode == "keyword" and query.startswith("cargar"))


@pytest.mark.parametrize(
    ("doc", "query", "factor"),
    [
        # "Imported Fixed Asset" holds imported records: an import.
        (IMPORTED_ASSET, "fixed asset lines before they are checked", 0.5),
        # Spanish "Importe" is an amount: not an import.
        (AMOUNT, "monto pagado de la factura", 1.0),
    ],
)
def test_the_import_weight_goes_by_the_title(
    rag_home: Path, kinds_db: str, embedder: Embedder, doc: Doc, query: str, factor: float
) -> None:
    plain = _searcher(rag_home, kinds_db, embedder, search_import_weight=1)
    searcher = _searcher(rag_home, kinds_db, embedder, search_import_weight=0.5)
    assert not asks_to_import(query)
    weighted = _scores(searcher.search(query, mode="keyword"))
    assert weighted[doc.source_id] == pytest.approx(
        factor * _scores(plain.search(query, mode="keyword"))[doc.source_id]
    )


def test_a_process_is_weighed_below_a_window_unless_the_query_asks_for_one(
    rag_home: Path, kinds_db: str, embedder: Embedder
) -> None:
    plain = _searcher(rag_home, kinds_db, embedder, search_entity_weights="")
    searcher = _searcher(rag_home, kinds_db, embedder)  # default: process=0.9
    query = "vendor invoice"
    weighted = _scores(searcher.search(query))
    unweighted = _scores(plain.search(query))
    assert weighted[INVOICE_REPORT.source_id] == pytest.approx(
        0.9 * unweighted[INVOICE_REPORT.source_id]
    )
    assert weighted[VENDOR_INVOICE.source_id] == pytest.approx(unweighted[VENDOR_INVOICE.source_id])
    for asks in ("vendor invoice report per month", "generar facturas de proveedor"):
        assert _scores(searcher.search(asks)) == pytest.approx(_scores(plain.search(asks)))


@pytest.mark.parametrize(
    ("query", "imports", "runs"),
    [
        ("import a CSV file with order headers", True, False),
        ("Tengo un Excel con 500 clientes, ¿cómo los cargo?", True, False),
        ("importar terceros desde un archivo plano", True, False),
        ("subir los productos de una hoja de cálculo", True, False),
        ("activos fijos", False, False),
        ("validar datos sin importar si vienen de la interfaz o de la API", False, False),
        ("¿Dónde registro la factura del proveedor?", False, False),
        ("calcular mrp", False, True),
        ("Generate the twelve monthly periods", False, True),
        ("genera las facturas de los pedidos", False, True),
        ("run the aging report", False, True),
        ("informe de ventas por región", False, True),
        ("purchase orders created automatically from the sales order", False, True),
        ("cruzar los pagos automáticamente", False, True),
        ("price a batch of products at once", False, True),
        ("where do I enter the general ledger journal", False, False),
        ("which products are below minimum stock", False, False),
    ],
)
def test_what_a_query_asks_for(query: str, imports: bool, runs: bool) -> None:
    assert asks_to_import(query) is imports
    assert (PROCESS_WORDS.search(fold(query)) is not None) is runs


def asks_to_import(query: str) -> bool:
    """The dictionary's rule (sources/idempiere/ranking.py) as the engine applies it."""
    return IMPORT_WORDS.search(fold(query)) is not None


def test_the_import_weight_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ("0", "1.5", "much"):
        monkeypatch.setenv("RAG_SEARCH_IMPORT_WEIGHT", bad)
        with pytest.raises(ConfigError, match="RAG_SEARCH_IMPORT_WEIGHT"):
            load_settings()
