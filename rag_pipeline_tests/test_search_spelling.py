"""Typing errors in queries (search/spelling.py, migration m006), on a real database with the
real model: a misspelled word finds what the right one finds; a word the corpus merely lacks,
an identifier or a word with digits is never changed."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_pipeline.cli import main
from rag_pipeline.core.embedding import Embedder
from rag_pipeline.search import Searcher
from rag_pipeline.search.spelling import (
    Candidate,
    apply_corrections,
    candidate_words,
    choose_corrections,
    one_edit_variants,
)
from rag_pipeline.settings import load_settings
from rag_pipeline.store.connection import connect
from rag_pipeline.store.migrations import migrate
from rag_pipeline_tests.search_fixtures import indexed_database
from rag_pipeline_tests.search_support import Doc

MODES = ("hybrid", "vector", "keyword")

COMMISSION = Doc(
    "ad_metadata",
    "AD_Window:207",
    "Commission",
    "# Commission\n\nDefine how and when commissions are calculated and to whom they are paid; "
    "a commission run computes what each sales representative earned.\n",
    metadata={"entity_type": "window"},
)
COMMISSION_RUN = Doc(
    "ad_metadata",
    "AD_Window:212",
    "Commission Run",
    "# Commission Run\n\nThe commission amounts of one period, per sales representative.\n",
    metadata={"entity_type": "window"},
)
REQUISITION = Doc(
    "ad_metadata",
    "AD_Window:322",
    "Requisición",
    "# Requisición\n\nIncorpore y mantenga las requisiciones de materiales: una requisición "
    "pide productos a compras.\n",
    language="es_CO",
    metadata={"entity_type": "window"},
)
REQUISITION_PO = Doc(
    "ad_metadata",
    "AD_Process:337",
    "Crear OC desde Requisición",
    "# Crear OC desde Requisición\n\nCrear órdenes de compra desde una requisición.\n",
    language="es_CO",
    metadata={"entity_type": "process"},
)
# "right" is in two chunks, one edit from "night", which the corpus lacks and is a word.
RIGHTS = Doc(
    "files",
    "wiki/access-rights.md",
    "Access rights",
    "# Access rights\n\nA role has the right to open a window or not.\n\n"
    "## Processes\n\nThe right to run a process is given per role as well, and a role may "
    "run it every day.\n",
)
RIGHTS_2 = Doc(
    "files",
    "wiki/record-access.md",
    "Record access",
    "# Record access\n\nWhich records a role has the right to see or change.\n",
)
DOCS = [COMMISSION, COMMISSION_RUN, REQUISITION, REQUISITION_PO, RIGHTS, RIGHTS_2]


@pytest.fixture(scope="module")
def spelling_db(pg_admin_uri: str, embedder: Embedder) -> Iterator[str]:
    with indexed_database(pg_admin_uri, DOCS, embedder) as url:
        yield url


def _searcher(rag_home: Path, url: str, embedder: Embedder, **overrides: object) -> Searcher:
    return Searcher(load_settings(home=rag_home, vectordb_url=url, **overrides), embedder=embedder)


def test_one_edit_variants_of_a_short_word_are_the_four_kinds_of_edit() -> None:
    variants = one_edit_variants("ab")
    assert {"a", "b", "ba", "xb", "ax", "abz", "zab", "azb"} <= variants
    assert "ab" in variants  # replacing a letter by itself
    assert not variants & {"", "bax", "abab", "c"}
    # 2 drops, 1 swap, 2 x 27 replacements, 3 x 27 inserts; "ab" is two replacements and
    # "aab", "abb" are two inserts each
    assert len(variants) == 2 + 1 + 2 * 27 + 3 * 27 - 3


@pytest.mark.parametrize("word", ["comiss", "requisision", "ab", "ñandu"])
def test_one_edit_variants_are_exactly_the_words_one_edit_away(
    database_url: str, word: str
) -> None:
    with connect(database_url) as conn:
        migrate(conn)
        rows = conn.execute("SELECT rag.one_edit_variants(%s)", (word,)).fetchall()
    variants = [row[0] for row in rows]
    assert len(variants) == len(set(variants))
    assert set(variants) == one_edit_variants(word)


@pytest.mark.parametrize("mode", MODES)
def test_a_misspelled_word_finds_what_the_right_one_finds(
    rag_home: Path, spelling_db: str, embedder: Embedder, mode: str
) -> None:
    searcher = _searcher(rag_home, spelling_db, embedder)
    right = searcher.search("commission", mode=mode, top_k=2)  # type: ignore[arg-type]
    typed = searcher.search("comission", mode=mode, top_k=2)  # type: ignore[arg-type]
    assert [h.source_id for h in typed] == [h.source_id for h in right]
    assert typed[0].source_id in {"AD_Window:207", "AD_Window:212"}


def test_without_correction_the_keyword_leg_finds_nothing_for_the_misspelled_word(
    rag_home: Path, spelling_db: str, embedder: Embedder
) -> None:
    off = _searcher(rag_home, spelling_db, embedder, search_typo_correction=False)
    assert off.search("comission", mode="keyword") == []
    assert off.corrections(off.prepare("comission")) == {}


def test_a_spanish_word_is_corrected_to_the_indexed_form_without_accents(
    rag_home: Path, spelling_db: str, embedder: Embedder
) -> None:
    searcher = _searcher(rag_home, spelling_db, embedder)
    query = searcher.prepare("requisision de materiales")
    assert query.language == "es_CO"
    assert searcher.corrections(query) == {"requisision": "requisicion"}
    hits = searcher.search("requisision de materiales", mode="keyword", top_k=2)
    assert {h.source_id for h in hits} == {"AD_Window:322", "AD_Process:337"}


def test_a_misspelled_vocabulary_word_is_corrected_and_a_right_one_left_alone(
    rag_home: Path, spelling_db: str, embedder: Embedder
) -> None:
    searcher = _searcher(rag_home, spelling_db, embedder)
    # The corpus lacks "bodega"; the Spanish vocabulary maps it to Almacén.
    assert searcher.corrections(searcher.prepare("¿dónde creo una boodega?")) == {
        "boodega": "bodega"
    }
    assert searcher.corrections(searcher.prepare("¿dónde creo una bodega?")) == {}
    assert "almacen" in searcher.expansion(searcher.corrected(searcher.prepare("una boodega")))
    off = _searcher(rag_home, spelling_db, embedder, search_vocabulary_weight=0)
    assert off.corrections(off.prepare("¿dónde creo una boodega?")) == {}


def test_a_word_the_corpus_lacks_is_not_taken_for_a_typing_error(
    rag_home: Path, spelling_db: str, embedder: Embedder
) -> None:
    searcher = _searcher(rag_home, spelling_db, embedder)
    # "night" is one edit from the indexed "right" but a common English word.
    assert searcher.corrections(searcher.prepare("run a process every night")) == {}
    # "nights" is the same; "rights" is indexed as it is typed.
    assert searcher.corrections(searcher.prepare("access rights nights")) == {}


def test_the_cli_table_shows_the_corrected_query(
    rag_home: Path, spelling_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_HOME", str(rag_home))
    monkeypatch.setenv("RAG_VECTORDB_URL", spelling_db)
    result = CliRunner().invoke(main, ["search", "-k", "1", "comission"])
    assert result.exit_code == 0, result.output
    assert "(searched as: commission)" in result.output
    plain = CliRunner().invoke(main, ["search", "-k", "1", "commission"])
    assert "searched as" not in plain.output


def test_candidate_words_leave_identifiers_short_words_and_digits_alone() -> None:
    text = "¿Comission? C_BPartner_ID DocStatus M_Locator HIKARICP x2order lista de preciós"
    assert candidate_words(text) == ["comission", "hikaricp", "lista", "preciós"]


def test_apply_corrections_keeps_punctuation_and_every_other_word() -> None:
    text = "¿Dónde se configura la Comission? (comission, rules)"
    fixed = apply_corrections(text, {"comission": "commission"})
    assert fixed == "¿Dónde se configura la commission? (commission, rules)"
    assert apply_corrections(text, {}) == text


def test_choose_corrections_weighs_how_common_each_word_is() -> None:
    candidates = [
        # a common misspelling (Zipf ~2) of a far more common word: corrected
        Candidate("comission", "commission", True, 3),
        # a common word the corpus lacks: never corrected, however frequent its neighbour
        Candidate("night", "right", True, 50),
        # no word of the language: the neighbour in most chunks, if a word or indexed as is
        Candidate("requisision", "requisicion", True, 4),
        Candidate("requisision", "requisisiona", False, 9),
        # no word, and its only neighbour is neither a word nor indexed as typed
        Candidate("pedidoss", "puedidoss", False, 40),
    ]
    assert choose_corrections(candidates, "en_US") == {
        "comission": "commission",
        "requisision": "requisicion",
    }


def test_long_words_and_words_past_the_understood_ones_are_not_corrected(
    rag_home: Path, spelling_db: str, embedder: Embedder
) -> None:
    searcher = _searcher(rag_home, spelling_db, embedder, search_max_understood_words=8)
    # A word longer than RAG_SEARCH_MAX_CORRECTION_LETTERS is searched as typed: its one-edit
    # variants (55 a letter) are never generated.
    assert candidate_words("x" * 2000 + " comission") == ["comission"]
    assert candidate_words("comissionx", max_letters=9) == []
    long_word = "comission" + "s" * 30
    assert searcher.corrections(searcher.prepare(f"{long_word} rules")) == {}
    # Typo correction reads the first RAG_SEARCH_MAX_UNDERSTOOD_WORDS words only.
    first = searcher.understand("comission " + "rules " * 20, "keyword")
    assert first.corrections == {"comission": "commission"}
    late = searcher.understand("rules " * 20 + "comission", "keyword")
    assert late.corrections == {}
    assert late.query.text.endswith("comission")


def test_at_most_eight_unknown_words_are_looked_up(spelling_db: str) -> None:
    from rag_pipeline.search.spelling import MAX_UNKNOWN, find_unknown

    words = " ".join(f"zzqx{chr(97 + i)}{chr(97 + j)}" for i in range(5) for j in range(5))
    with connect(spelling_db) as conn:
        unknown = find_unknown(conn, f"comission {words}", "english")
    assert len(unknown.words) == MAX_UNKNOWN
    assert "comission" in unknown.words  # the first unknown word of the query
    assert {c.variant for c in unknown.candidates} >= {"commission"}
