"""Bounded inputs of the Python API (and so of the CLI, MCP and ask, which go through it):
query length, top_k and batch size, each a setting with an error that names it."""

from pathlib import Path

import pytest

from rag_pipeline.core.embedding import Embedder
from rag_pipeline.search import QueryError, Searcher
from rag_pipeline.settings import load_settings
from rag_pipeline_tests import search_fixtures
from rag_pipeline_tests.search_corpus import WAREHOUSE

pytestmark = pytest.mark.integration

indexed_db = search_fixtures.indexed_db  # the shared module-scoped fixture


def _searcher(rag_home: Path, url: str, embedder: Embedder, **overrides: object) -> Searcher:
    settings = load_settings(home=rag_home, vectordb_url=url, **overrides)
    return Searcher(settings, embedder=embedder, conninfo=url)


@pytest.fixture(scope="module")
def searcher(rag_home: Path, indexed_db: str, embedder: Embedder) -> Searcher:
    return _searcher(rag_home, indexed_db, embedder)


def test_a_long_query_is_refused_with_the_setting_named(searcher: Searcher) -> None:
    for length in (2001, 100_000):
        with pytest.raises(QueryError, match="RAG_SEARCH_MAX_QUERY_CHARS"):
            searcher.search("y" * length)
    typed = searcher.prepare("locator")
    with pytest.raises(QueryError, match="RAG_SEARCH_MAX_QUERY_CHARS"):
        searcher.search(type(typed)("y" * 2001, "en_US", "english", ()))


def test_a_2000_character_query_finds_what_its_real_words_ask_for(searcher: Searcher) -> None:
    words = ("aisle bin level of a locator in the warehouse " * 60)[:2000]
    assert searcher.search(words, top_k=3)[0].source_id == WAREHOUSE.source_id
    # One 1,990-letter word beside real ones: not corrected, the real words still found.
    text = "x" * 1990 + " locator"
    assert searcher.corrections(searcher.prepare(text)) == {}
    assert searcher.search(text, top_k=3)[0].source_id == WAREHOUSE.source_id


def test_the_limit_follows_its_setting(rag_home: Path, indexed_db: str, embedder: Embedder) -> None:
    small = _searcher(
        rag_home,
        indexed_db,
        embedder,
        search_max_query_chars=20,
        search_max_top_k=3,
        search_max_batch=3,
    )
    with pytest.raises(QueryError, match="at most 20"):
        small.search("aisle bin level of a locator")
    with pytest.raises(ValueError, match="RAG_SEARCH_MAX_TOP_K"):
        small.search("locator", top_k=4)
    assert len(small.search("locator", top_k=3)) <= 3
    with pytest.raises(ValueError, match="RAG_SEARCH_MAX_BATCH"):
        small.search_batch(["locator", "aisle", "bin", "level"])
    results = small.search_batch(["locator", "", "y" * 21], top_k=1)
    assert isinstance(results[0], list)
    assert results[0][0].source_id == WAREHOUSE.source_id
    assert results[1:] == [
        "the query is empty: give some words to search for",
        "the query has 21 characters; at most 20 are searched (RAG_SEARCH_MAX_QUERY_CHARS)",
    ]


def test_bad_limits_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="RAG_SEARCH_MAX_QUERY_CHARS"):
        load_settings(search_max_query_chars=0)
    with pytest.raises(ValueError, match="RAG_SEARCH_MAX_CORRECTION_LETTERS"):
        load_settings(search_max_correction_letters=1000)


def test_a_text_longer_than_a_question_skips_the_phrase_lookup(searcher: Searcher) -> None:
    question = searcher.prepare("where do I keep the stock of each product in the warehouse")
    text = searcher.prepare(" ".join(["stock"] * 49))
    assert searcher.understanding.compares_phrases(question)
    assert not searcher.understanding.compares_phrases(text)
    assert searcher.understand(text, "hybrid").added.similar is None
