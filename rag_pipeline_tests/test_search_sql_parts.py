"""Each named part of the search statement (queries.py) run on its own, on the hand-made
corpus: the vector leg, the keyword leg, the title rules, fusion, section collapse, lineage."""

from pathlib import Path
from typing import Any, LiteralString, cast

import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

from rag_pipeline.core.embedding import Embedder
from rag_pipeline.search import Searcher
from rag_pipeline.search.collapse import LINEAGE, SECTION_COLLAPSE
from rag_pipeline.search.queries import (
    FUSION,
    FUSION_SCORES,
    KEYWORD_RANKS,
    TITLE_RULES,
    keyword_leg,
    search_statement,
    vector_leg,
)
from rag_pipeline.settings import load_settings
from rag_pipeline_tests import search_fixtures
from rag_pipeline_tests.search_corpus import COUNTING, PRICES, WAREHOUSE

pytestmark = pytest.mark.integration

indexed_db = search_fixtures.indexed_db  # the shared module-scoped fixture

_FILTERS = "true"


@pytest.fixture(scope="module")
def searcher(rag_home: Path, indexed_db: str, embedder: Embedder) -> Searcher:
    settings = load_settings(home=rag_home, vectordb_url=indexed_db)
    return Searcher(settings, embedder=embedder, conninfo=indexed_db)


def _params(searcher: Searcher, text: str, top_k: int = 10) -> dict[str, Any]:
    prepared = searcher.understand(text, "hybrid")
    request = searcher.request(top_k, None, None, None, None, "parent", None)
    return searcher.parameters(prepared, request)


def _rows(url: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    with psycopg.connect(url) as conn:
        register_vector(conn)
        with conn.cursor(row_factory=dict_row) as cursor:
            return cursor.execute(cast(LiteralString, text), params).fetchall()


def _titles(url: str, section_ids: list[str]) -> list[str]:
    with psycopg.connect(url) as conn:
        return [
            conn.execute(
                "SELECT d.title FROM rag.sections s JOIN rag.documents d ON d.id = s.document_id"
                " WHERE s.id = %s",
                (section,),
            ).fetchone()[0]  # type: ignore[index]
            for section in section_ids
        ]


def _keyword(scorer: str = "bm25") -> str:
    return "WITH" + keyword_leg(scorer)  # type: ignore[arg-type]


def _titled() -> str:
    return ",".join(
        [
            _keyword(),
            TITLE_RULES.format(
                typed_query="lower(%(query_text)s::text)",
                typed_document_title="lower(d.title)",
                typed_section_title="lower(s.title)",
            ),
        ]
    )


def test_the_vector_leg_ranks_sections_by_their_nearest_chunk(
    searcher: Searcher, indexed_db: str
) -> None:
    leg = vector_leg()
    params = _params(searcher, "aisle bin and level of a locator")
    rows = _rows(indexed_db, f"WITH {leg} SELECT * FROM vec ORDER BY rank", params)
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    assert len({r["section_id"] for r in rows}) == len(rows)  # one row a section
    assert _titles(indexed_db, [rows[0]["section_id"]]) == [WAREHOUSE.title]


def test_the_keyword_leg_scores_bm25_and_reads_identifiers(
    searcher: Searcher, indexed_db: str
) -> None:
    params = _params(searcher, "M_Locator")
    rows = _rows(indexed_db, _keyword() + " SELECT * FROM kw_best ORDER BY score DESC", params)
    assert _titles(indexed_db, [rows[0]["section_id"]]) == [WAREHOUSE.title]
    assert rows[0]["score"] > 0
    # Identifier terms add their IDF times ident_boost: none, and the score drops.
    without = _rows(
        indexed_db,
        _keyword() + " SELECT * FROM kw_best ORDER BY score DESC",
        params | {"ident_boost": 0.0},
    )
    assert without[0]["score"] < rows[0]["score"]


def test_the_title_rules_lift_a_title_that_is_exactly_the_query(
    searcher: Searcher, indexed_db: str
) -> None:
    params = _params(searcher, "price lists")
    sql = _titled() + " SELECT b.section_id, b.score AS plain, t.score AS titled"
    sql += " FROM kw_best b JOIN kw_titled t USING (section_id)"
    rows = {r["section_id"]: r for r in _rows(indexed_db, sql, params)}
    titles = dict(zip(rows, _titles(indexed_db, list(rows)), strict=True))
    (price,) = [s for s, title in titles.items() if title == PRICES.title]
    # The query's IDF sum again (title_boost), and more for a title written as typed.
    assert rows[price]["titled"] > 1.5 * rows[price]["plain"]
    untyped = _rows(indexed_db, sql, params | {"typed_title_boost": 0.0})
    assert rows[price]["plain"] < {r["section_id"]: r["titled"] for r in untyped}[price]
    assert {r["section_id"]: r["titled"] for r in untyped}[price] < rows[price]["titled"]
    off = _rows(indexed_db, sql, params | {"title_boost": 0.0, "typed_title_boost": 0.0})
    assert {r["section_id"]: r["titled"] for r in off}[price] == pytest.approx(rows[price]["plain"])


def test_fusion_scores_a_section_first_in_both_legs_one(
    searcher: Searcher, indexed_db: str
) -> None:
    params = _params(searcher, "aisle bin and level of a locator in the warehouse")
    leg = vector_leg()
    sql = ",".join([_titled(), KEYWORD_RANKS, leg, FUSION.format(fusion=FUSION_SCORES["tmm"])])
    rows = _rows(indexed_db, sql + " SELECT * FROM fused ORDER BY score DESC", params)
    best = rows[0]
    assert (best["v_rank"], best["k_rank"]) == (1, 1)
    assert best["score"] == pytest.approx(1.0)
    assert all(0 <= r["score"] <= 1 for r in rows)


def test_section_collapse_gives_one_hit_a_section_and_lineage_names_the_columns(
    searcher: Searcher, indexed_db: str
) -> None:
    params = _params(searcher, "stock count of every product in the aisle", top_k=5)
    rows = _rows(indexed_db, search_statement("hybrid").as_string(), params)
    assert len({r["section_id"] for r in rows}) == len(rows) <= 5
    assert rows[0]["source_id"] == COUNTING.source_id
    assert {"partition", "run_id", "source_version", "ingested_at"} <= rows[0].keys()
    assert "top_hits" in SECTION_COLLAPSE
    assert "FROM top_hits" in LINEAGE
