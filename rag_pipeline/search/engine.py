"""Hybrid search over the index: the public API (`search`, `Searcher`; `SearchHit` in hits.py).

A Searcher holds what is costly to build once per process — the model (loaded once through
`rag_pipeline.store.runtime`), a connection pool and the query understanding
(`understanding.py`: vocabulary, vector cache) — and answers a query in two steps:
understand it into a PreparedQuery, then run that as one SQL statement (`queries.py`),
filters included. Every input is bounded here, so the CLI, MCP and `ask` get the same
limits: query length, top_k, batch size (RAG_SEARCH_MAX_*), and the word length typo
correction looks at.
"""

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import psycopg
from psycopg.rows import dict_row

from rag_pipeline.core.embedding import Embedder
from rag_pipeline.search.encoder import load_query_embedder
from rag_pipeline.search.glossary import GlossaryCache
from rag_pipeline.search.hits import LegScores, SearchHit, hit_from_row
from rag_pipeline.search.plugins import source_rankings
from rag_pipeline.search.queries import Fusion, KeywordScorer, Mode, search_statement
from rag_pipeline.search.query import Query, QueryError, check_length
from rag_pipeline.search.request import Expand, SearchRequest, statement_parameters
from rag_pipeline.search.spelling import Unknown, apply_corrections, find_unknown
from rag_pipeline.search.stats import refresh_search_stats, stats_state
from rag_pipeline.search.understanding import AddedWords, PreparedQuery, Understanding
from rag_pipeline.search.vocabulary.phrase_vectors import SimilarEntry
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.settings.ranking import Ranking
from rag_pipeline.store.migrations import check_stored_model, stored_second_model
from rag_pipeline.store.pool import search_pool, without_timeout
from rag_pipeline.store.runtime import SecondModel, ready_conninfo

logger = logging.getLogger(__name__)

MODES: tuple[Mode, ...] = ("hybrid", "vector", "keyword")
# How often (seconds) a Searcher looks whether the chunks changed since the BM25 statistics.
_STATS_CHECK_INTERVAL = 2.0
__all__ = ["AddedWords", "LegScores", "PreparedQuery", "SearchHit", "Searcher", "search"]


class Searcher:
    """A database and a model, ready to answer queries (reuse it: loading costs ~0.5 s)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        conninfo: str | None = None,
        keyword_scorer: KeywordScorer = "bm25",
        keyword_scan: int | None = None,
    ):
        """Use the configured database (or `conninfo`) and model (or `embedder`).

        `keyword_scorer="ts_rank"` ranks the keyword leg by PostgreSQL's ts_rank instead of
        the BM25-style score (kept to measure one against the other). `keyword_scan` overrides
        the keyword leg's budget of chunks (benchmarks/search.py compares it with all).

        Raises:
            ModelMismatchError: the index holds vectors of another model.
        """
        self.settings = settings or load_settings()
        self.ranking = Ranking.from_settings(self.settings)
        self.conninfo = conninfo or ready_conninfo(self.settings)
        self.embedder = embedder or load_query_embedder(self.settings)
        self.keyword_scorer: KeywordScorer = keyword_scorer
        self.keyword_scan = keyword_scan or self.ranking.keyword_scan
        # Shared with the agent tools; restarts a stopped embedded server and reconnects.
        self._pool = search_pool(self.settings, conninfo)
        model_id = self.embedder.model_id
        self._pool.run(lambda conn: check_stored_model(conn, model_id))
        self.rules = source_rankings()
        glossary = GlossaryCache(self._pool.run)
        second = SecondModel(self.settings, self._stored_second_model)
        self.understanding = Understanding(
            self.settings, self.ranking, self.embedder, self.rules, glossary, second
        )
        self.vocabulary = self.understanding.vocabulary
        self._stats_lock = threading.Lock()
        self._stats_checked = 0.0
        self._stats_refreshing = False
        self._small_index = False
        self._max_chars = self.settings.search_max_query_chars

    def search(
        self,
        query: str | Query,
        *,
        top_k: int = 10,
        mode: Mode | None = None,
        source_types: Sequence[str] | None = None,
        languages: Sequence[str] | None = None,
        breadcrumb: str | None = None,
        min_score: float | None = None,
        explain: bool = False,
        expand: Expand = "parent",
        language: str | None = None,
        fusion: Fusion | None = None,
        sections_per_document: int | None = None,
    ) -> list[SearchHit]:
        """The `top_k` best sections for `query`, best first, a document's sections past
        `sections_per_document` after the other documents'.

        Args:
            query: what to look for (at most RAG_SEARCH_MAX_QUERY_CHARS characters, 2,000 by
                default; sanitized like documents), or a Query from `prepare(...)`, searched
                as it is but for typo correction (its language wins).
            top_k: how many sections to return (at most RAG_SEARCH_MAX_TOP_K).
            mode: "hybrid" (default: RAG_SEARCH_MODE), "vector" or "keyword".
            source_types: only these source types.
            languages: only these languages (`en_US`, or `en` for every English variant).
            breadcrumb: only documents whose breadcrumb starts with this.
            min_score: drop hits scoring below this (the scale depends on the mode).
            explain: fill each hit's `explain` with every leg's rank and score.
            expand: "parent" returns each hit's whole section, "chunk" only the chunk.
            language: the query's language (default: one `languages` entry, else detected).
            fusion: "tmm", "minmax" or "rrf" for hybrid (default: RAG_SEARCH_FUSION).
            sections_per_document: sections of one document listed before the next documents'
                (default: RAG_SEARCH_SECTIONS_PER_DOCUMENT; 0: no limit).

        Raises:
            ValueError: an unusable query (empty, too long) or argument; the message names
                the setting of a limit.
        """
        check_length(query if isinstance(query, str) else query.text, self._max_chars)
        chosen = self._mode(mode)
        request = self.request(
            top_k, source_types, languages, breadcrumb, min_score, expand, sections_per_document
        )
        if fusion is not None:
            request = replace(request, fusion=fusion)
        prepared = self.understand(query, chosen, language, languages)
        return self.execute(prepared, request, explain)

    def search_batch(self, queries: Sequence[str], **options: Any) -> list[list[SearchHit] | str]:
        """Each query's hits, or the message of why it could not be searched.

        At most RAG_SEARCH_MAX_BATCH queries: a longer batch is refused before any is searched.
        `options` are `search`'s keyword arguments.
        """
        limit = self.settings.search_max_batch
        if len(queries) > limit:
            raise ValueError(
                f"the batch holds {len(queries):,} queries; at most {limit:,} are searched "
                "(RAG_SEARCH_MAX_BATCH)"
            )
        results: list[list[SearchHit] | str] = []
        for text in queries:
            try:
                results.append(self.search(text, **options))
            except QueryError as exc:
                results.append(str(exc))
        return results

    def understand(
        self,
        query: str | Query,
        mode: Mode | None = None,
        language: str | None = None,
        languages: Sequence[str] | None = None,
    ) -> PreparedQuery:
        """`query` understood for a search in `mode` (see `understanding.py`)."""
        if isinstance(query, str):
            typed = self.prepare(query, language, languages)
        else:
            check_length(query.text, self._max_chars)
            typed = query
        return self.understanding.understand(typed, self._mode(mode), self._unknown)

    def execute(
        self, prepared: PreparedQuery, request: SearchRequest, explain: bool = False
    ) -> list[SearchHit]:
        """Run `prepared` as one statement (twice or more when the vector leg must widen)."""
        params = self.parameters(prepared, request)
        statement = search_statement(
            prepared.mode,
            request.fusion,
            self.keyword_scorer,
            exact_vectors=self._small_index,
            vector_column=prepared.vector_column,
        )
        widest = self.ranking.max_vector_candidates

        def execute(conn: psycopg.Connection) -> list[dict[str, Any]]:
            self._fresh_stats(conn)
            with conn.cursor(row_factory=dict_row) as cursor:
                while True:
                    rows = cursor.execute(statement, params).fetchall()
                    # Few hits although the vector leg read all it was allowed: the nearest
                    # chunks crowd into a few long sections; read more.
                    widen = (
                        prepared.mode != "keyword"
                        and 0 < len(rows) < request.top_k
                        and rows[0]["vector_candidates_read"] >= params["vector_candidates"]
                        and params["vector_candidates"] < widest
                    )
                    if not widen:
                        return rows
                    params["vector_candidates"] *= 4

        return [hit_from_row(row, explain) for row in self._pool.run(execute)]

    def _stored_second_model(self) -> str | None:
        stored = self._pool.run(stored_second_model)
        return None if stored is None else stored[0]

    def _mode(self, mode: Mode | None) -> Mode:
        chosen: Mode = mode or self.settings.search_mode
        if chosen not in MODES:
            raise ValueError(f"unknown search mode {chosen!r}; use one of {', '.join(MODES)}")
        return chosen

    def request(
        self,
        top_k: int,
        source_types: Sequence[str] | None,
        languages: Sequence[str] | None,
        breadcrumb: str | None,
        min_score: float | None,
        expand: Expand,
        sections_per_document: int | None,
    ) -> SearchRequest:
        """The filters and size of a search, checked (RAG_SEARCH_MAX_TOP_K)."""
        limit = self.settings.search_max_top_k
        if not 1 <= top_k <= limit:
            raise ValueError(f"top_k must be between 1 and {limit} (RAG_SEARCH_MAX_TOP_K)")
        if sections_per_document is not None and sections_per_document < 0:
            raise ValueError("sections_per_document must be 0 (no limit) or more")
        return SearchRequest(
            top_k,
            source_types,
            languages,
            breadcrumb,
            min_score,
            expand,
            sections_per_document,
            self.ranking.fusion,
        )

    def parameters(self, prepared: PreparedQuery, request: SearchRequest) -> dict[str, Any]:
        """The statement's bind parameters (`request.statement_parameters`)."""
        return statement_parameters(prepared, request, self.ranking, self.rules, self.keyword_scan)

    def _unknown(self, query: Query) -> Unknown:
        """The words of `query` the index does not hold, with the candidates to correct them."""

        def spell(conn: psycopg.Connection) -> Unknown:
            self._fresh_stats(conn)
            limit = self.settings.search_max_correction_letters
            return find_unknown(conn, query.text, query.ts_config, limit)

        return self._pool.run(spell)

    # The understanding steps, for callers that show them (`rag search`).
    def prepare(
        self, query: str, language: str | None = None, languages: Sequence[str] | None = None
    ) -> Query:
        """`query` cleaned, in `language`, else the one language filtered on, else detected."""
        return self.understanding.prepare(query, language, languages)

    def corrected(self, query: Query) -> Query:
        """`query` with its typing errors corrected (spelling.py), or as it is."""
        return replace(query, text=apply_corrections(query.text, self.corrections(query)))

    def corrections(self, query: Query) -> dict[str, str]:
        """`{typed word: the word meant}` for the misspelled words of `query`."""
        return self.understanding.corrections(query, self._unknown)

    def expansion(self, query: Query) -> str:
        """The iDempiere words the vocabulary adds to `query` ('' when it adds none or is off)."""
        return " ".join(words for words, _ in self.understanding.expansions(query))

    def expansions(self, query: Query) -> list[tuple[str, int]]:
        """The groups of words the vocabulary adds, each with the query words it stands for."""
        return self.understanding.expansions(query)

    def named(self, query: Query) -> str | None:
        """The iDempiere title `query` is only another name for, if it is one."""
        return self.understanding.named(query)

    def added_words(self, query: Query, mode: Mode | None = None) -> AddedWords:
        """The vocabulary's words a search in `mode` (default: RAG_SEARCH_MODE) adds."""
        return self.understanding.added_words(query, self._mode(mode))

    def similar_entry(self, query: Query) -> SimilarEntry | None:
        """The vocabulary entry of the phrase closest in meaning to `query`, if close enough
        and looked up at all (`Understanding.compares_phrases`)."""
        if not self.understanding.compares_phrases(query):
            return None
        vector = self.understanding.query_vector(query.text)
        return self.understanding.closest_entry(query, vector)

    def _fresh_stats(self, conn: psycopg.Connection) -> None:
        """Rebuild the BM25 statistics when the chunks changed since they were built.

        Checked at most every few seconds. For a small index they are rebuilt before the query;
        for a large one in the background, and queries use the previous ones meanwhile
        (document frequencies drift slowly).
        """
        now = time.monotonic()
        with self._stats_lock:
            if now - self._stats_checked < _STATS_CHECK_INTERVAL or self._stats_refreshing:
                return
            self._stats_checked = now
        state = stats_state(conn)
        if not state.fresh and state.rebuild_now:
            refresh_search_stats(conn)
            state = stats_state(conn)
        self._small_index = (state.built_chunks or 0) < self.ranking.exact_vectors_below
        if state.fresh or state.rebuild_now:
            return
        with self._stats_lock:
            if self._stats_refreshing:
                return
            self._stats_refreshing = True
        threading.Thread(target=self._refresh_stats, name="rag-search-stats", daemon=True).start()

    def _refresh_stats(self) -> None:
        try:
            self._pool.run(without_timeout(refresh_search_stats))
        except psycopg.Error as exc:  # the next check tries again
            logger.warning("could not refresh the search statistics: %s", exc)
        finally:
            with self._stats_lock:
                self._stats_refreshing = False

    def refresh_stats(self) -> None:
        """Rebuild the BM25 statistics now if the chunks changed (e.g. right after an ingest)."""
        self._pool.run(without_timeout(refresh_search_stats))


_default: Searcher | None = None
_default_lock = threading.Lock()


def default_searcher() -> Searcher:
    """The process's Searcher for the configured index (built on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Searcher()
        return _default


def search(
    query: str,
    *,
    top_k: int = 10,
    mode: Mode | None = None,
    source_types: Sequence[str] | None = None,
    languages: Sequence[str] | None = None,
    breadcrumb: str | None = None,
    min_score: float | None = None,
    explain: bool = False,
    expand: Expand = "parent",
    language: str | None = None,
    sections_per_document: int | None = None,
) -> list[SearchHit]:
    """Search the configured index (see `Searcher.search` for the arguments and limits)."""
    return default_searcher().search(
        query,
        top_k=top_k,
        mode=mode,
        source_types=source_types,
        languages=languages,
        breadcrumb=breadcrumb,
        min_score=min_score,
        explain=explain,
        expand=expand,
        language=language,
        sections_per_document=sections_per_document,
    )
