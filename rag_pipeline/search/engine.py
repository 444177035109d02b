"""Hybrid search over the index: the public API (`search`, `Searcher`, `SearchHit`).

A Searcher holds what is costly to build once per process — the model (loaded once through
`rag_pipeline.operations.runtime`), a connection pool and an LRU cache of query vectors — and
answers a
query with one SQL statement (see `queries.py`), filters included. A query with words of five
letters or more first takes one short round trip that looks up the words the index does not
hold, to correct typing errors (`spelling.py`).
"""

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg.types.json import Jsonb

from rag_pipeline.core.embedding import Embedder
from rag_pipeline.core.languages import language_prefix, ts_config_for
from rag_pipeline.operations.runtime import ready_conninfo
from rag_pipeline.search.encoder import QueryEmbedder, load_query_embedder
from rag_pipeline.search.language import (
    asks_for_process,
    asks_to_import,
    query_stop_words,
    request_words,
)
from rag_pipeline.search.pool import run, search_pool, without_timeout
from rag_pipeline.search.queries import Fusion, KeywordScorer, Mode, search_statement
from rag_pipeline.search.query import Query, prepare_query
from rag_pipeline.search.spelling import (
    Unknown,
    apply_corrections,
    candidate_words,
    choose_corrections,
    find_unknown,
    vocabulary_candidates,
)
from rag_pipeline.search.stats import refresh_search_stats, stats_state
from rag_pipeline.search.vocabulary import Vocabulary, expansion_language
from rag_pipeline.search.vocabulary.phrase_vectors import PhraseVectors, SimilarEntry
from rag_pipeline.settings import Settings, load_settings

logger = logging.getLogger(__name__)

Expand = Literal["parent", "chunk"]
MODES: tuple[Mode, ...] = ("hybrid", "vector", "keyword")
MAX_TOP_K = 1000
# Several chunks of one section collapse into one hit, so each leg fetches more chunks than
# hits; when a few long sections hold most of the nearest chunks, the vector leg widens.
_VECTOR_CANDIDATES_PER_HIT = 5
_MIN_VECTOR_CANDIDATES = 50
_MAX_VECTOR_CANDIDATES = 4000
# Sections of each leg that take part in fusion, and the keyword leg's budget of chunks to
# score: the rarest query words' chunks, while together within it. At 100k chunks its top 10
# shared 0.85 with scoring every match over benchmarks/search.py's queries (4,000: 0.93, at
# twice the keyword time).
_LEG_SECTIONS = 50
_KEYWORD_SCAN = 2000
# BM25 constants, measured on the labelled set (k1 1.2 / b 0.75, the textbook values, lost
# 0.045 nDCG@10): the ts_rank term frequency saturates already, and chunks vary little in
# length. An identifier hit counts like one more term of its own rarity.
_K1 = 0.9
_B = 0.4
_IDENT_BOOST = 1.0
# A keyword candidate whose document or section title is exactly the query gets its IDF sum
# this many times more (queries.py, kw_titled): known-item searches find the named thing first.
_TITLE_BOOST = 1.0
# And a title written as the query was typed (case, accents and punctuation aside) this much
# more: of "Verify BOM" and "Verify BOMs", whose words stem alike, the one typed goes first.
_TYPED_TITLE_BOOST = 0.5
# The words a question asks with ("create", "set up", "¿dónde registro ...?") count this much
# of a query word in the keyword leg. Measured: 0.5 lifted English nDCG@10 0.914 -> 0.924 on
# the language-graded set and Spanish 0.599 -> 0.623 on the second set; 0.25 cost Spanish.
_REQUEST_WORD_WEIGHT = 0.5
# A query in another language than English also looks for its words as English reads them
# (the wiki is English only): "réplica", "plugin", "2Pack", "OAuth". Measured on the eight
# labelled sets: 0.25 lifted four of them by 0.001-0.008 and lowered none; 0.5 and 1.0 cost
# the third and seventh sets' Spanish hit@1.
_CROSS_LANGUAGE_TERM_WEIGHT = 0.25
# The keyword score of a chunk in another language than the query's, when its document has a
# version in the query's language (a translated dictionary entry): English "red" is not the
# Spanish title "Red de Distribución", whose English version says "Distribution Network".
# Measured on the nine labelled sets: 0.5 changed them by -0.001 to +0.004; 0.25 no better.
_OTHER_VERSION_WEIGHT = 0.5
# A page of n sections (not a dictionary entry) scores (1 + ln n) ^ -this times its best
# section: the best of many sections beats a short page's one more often than it answers the
# question (an 18-section workshop page came in the top five of 138 of 1,077 labelled questions
# and was labelled for 6). Over the eighteen sets: 0.1 moved 67 questions of the second to
# fifteenth (53 up) and 21 of the sixteenth to eighteenth (15 up), mean nDCG@10 +0.002 and
# +0.006, the first set -0.001; 0.15 and 0.2 cost the first set 0.006 and 0.011.
_SECTIONS_EXPONENT = 0.1
# A query of fewer words is a name or a few keywords: no vocabulary phrase close in meaning is
# added (`Searcher.similar_entry`).
_SIMILAR_MIN_WORDS = 4
# Below this many chunks the vector leg compares every vector (a few ms): exact, and the same
# on every copy of the data, where an HNSW graph depends on the order rows were inserted in.
_EXACT_VECTORS_BELOW = 5000
# How often (seconds) a Searcher looks whether the chunks changed since the BM25 statistics.
_STATS_CHECK_INTERVAL = 2.0


@dataclass(frozen=True)
class AddedWords:
    """What the search vocabulary adds to a query in one mode."""

    expansions: list[tuple[str, int]]  # each group of words with the query words it stands for
    for_model: str  # the words the vector leg reads after the query ('' for none)
    similar: SimilarEntry | None  # the entry added for its phrase's meaning, if one was
    # The model's vector of the query alone, when the phrase lookup needed it (reused by the
    # vector leg when the model reads no added word, even with the vector cache off).
    query_vector: NDArray[np.float32] | None = None


@dataclass(frozen=True)
class LegScores:
    """Where each leg put a hit (None: the leg did not find its section)."""

    vector_rank: int | None
    vector_score: float | None  # cosine similarity of the section's best chunk
    keyword_rank: int | None
    keyword_score: float | None  # BM25-style score of the section's best chunk


@dataclass(frozen=True)
class SearchHit:
    """One matching parent section, represented by its best chunk."""

    source_type: str
    source_id: str
    language: str
    title: str
    breadcrumb: str
    section_title: str
    heading_path: list[str]
    url: str
    # vector: cosine; keyword: BM25; hybrid: fused, 1.0 = first in every leg; each times the
    # weight of the document's entity type (RAG_SEARCH_ENTITY_WEIGHTS, 1 for most)
    score: float
    text: str  # the best-matching chunk
    parent_text: str  # the whole section ('' when expand='chunk')
    document_id: str
    section_id: str
    chunk_id: str
    explain: LegScores | None = None  # with explain=True

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return asdict(self)


class _VectorCache:
    """A small thread-safe LRU of query vectors: repeated queries skip the model."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> NDArray[np.float32] | None:
        with self._lock:
            vector = self._items.get(key)
            if vector is not None:
                self._items.move_to_end(key)
            return vector

    def put(self, key: str, vector: NDArray[np.float32]) -> None:
        if self.size == 0:
            return
        with self._lock:
            self._items[key] = vector
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


class Searcher:
    """A database and a model, ready to answer queries (reuse it: loading costs ~0.5 s)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        conninfo: str | None = None,
        keyword_scorer: KeywordScorer = "bm25",
        keyword_scan: int = _KEYWORD_SCAN,
    ):
        """Use the configured database (or `conninfo`) and model (or `embedder`).

        `keyword_scorer="ts_rank"` ranks the keyword leg by PostgreSQL's ts_rank instead of
        the BM25-style score (kept to measure one against the other). `keyword_scan` is the
        keyword leg's budget of chunks to score (benchmarks/search.py compares it with
        scoring every match).
        """
        self.settings = settings or load_settings()
        self.conninfo = conninfo or ready_conninfo(self.settings)
        self.embedder: QueryEmbedder | Embedder = embedder or load_query_embedder(self.settings)
        self.keyword_scorer: KeywordScorer = keyword_scorer
        self.keyword_scan = keyword_scan
        # Shared with the agent tools; restarts a stopped embedded server and reconnects.
        self._pool = search_pool(self.settings, conninfo)
        self._vectors = _VectorCache(self.settings.search_query_cache_size)
        self.vocabulary = Vocabulary.load(self.settings.search_vocabulary_dir)
        self._phrase_vectors = PhraseVectors(
            self.vocabulary.phrases,
            self.embedder.embed_query,
            self.embedder.model_id,
            self.settings.home / "vocabulary-vectors",
        )
        self._stats_lock = threading.Lock()
        self._stats_checked = 0.0
        self._stats_refreshing = False
        self._small_index = False

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
            query: what to look for (at most 2,000 characters; sanitized like documents), or
                a Query from `corrected(prepare(...))`, searched as it is (its language wins).
            top_k: how many sections to return.
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
            ValueError: an unusable query (empty, too long) or argument.
        """
        chosen: Mode = mode or self.settings.search_mode
        if chosen not in MODES:
            raise ValueError(f"unknown search mode {chosen!r}; use one of {', '.join(MODES)}")
        if not 1 <= top_k <= MAX_TOP_K:
            raise ValueError(f"top_k must be between 1 and {MAX_TOP_K}")
        if sections_per_document is not None and sections_per_document < 0:
            raise ValueError("sections_per_document must be 0 (no limit) or more")
        prepared = (
            query
            if isinstance(query, Query)
            else self.corrected(self.prepare(query, language, languages))
        )
        added = self.added_words(prepared, chosen)
        vector = None
        if chosen != "keyword" and added.for_model:
            # The model reads the iDempiere words too: "supplier (business partner vendor)".
            vector = self._query_vector(f"{prepared.text} ({added.for_model})")
        elif chosen != "keyword":
            # The phrase lookup's vector when there was one: with the cache off it would
            # otherwise be embedded a second time.
            vector = added.query_vector
            if vector is None:
                vector = self._query_vector(prepared.text)
        params = self._params(
            prepared,
            added.expansions,
            vector,
            top_k,
            source_types,
            languages,
            breadcrumb,
            min_score,
            expand,
            sections_per_document,
        )

        def execute(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
            self._fresh_stats(conn)
            statement = search_statement(
                chosen,
                fusion or self.settings.search_fusion,
                self.keyword_scorer,
                exact_vectors=self._small_index,
            )
            while True:
                rows = conn.execute(statement, params).fetchall()
                widen = (
                    chosen != "keyword"
                    and 0 < len(rows) < top_k
                    and int(rows[0][18]) >= params["vec_limit"]
                    and params["vec_limit"] < _MAX_VECTOR_CANDIDATES
                )
                if not widen:
                    return rows
                params["vec_limit"] *= 4

        rows = run(self._pool, execute)
        return [_hit(row, explain) for row in rows]

    def _params(
        self,
        query: Query,
        expansions: list[tuple[str, int]],
        vector: NDArray[np.float32] | None,
        top_k: int,
        source_types: Sequence[str] | None,
        languages: Sequence[str] | None,
        breadcrumb: str | None,
        min_score: float | None,
        expand: Expand,
        sections_per_document: int | None,
    ) -> dict[str, Any]:
        settings = self.settings
        tagged = [expansion_language(words) for words, _ in expansions]
        return {
            "qv": vector,
            "cfg": query.ts_config,
            "query_language": language_prefix(query.language),
            "qtext": query.text,
            "idents": list(query.identifiers),
            "request_words": request_words(query.language),
            "query_stops": query_stop_words(query.text, query.language),
            "request_weight": _REQUEST_WORD_WEIGHT,
            "cross_cfg": None if language_prefix(query.language) == "en" else "english",
            "cross_weight": _CROSS_LANGUAGE_TERM_WEIGHT,
            "other_version_weight": _OTHER_VERSION_WEIGHT,
            "exp_texts": [words for _, words in tagged],
            "exp_covers": [covers for _, covers in expansions],
            # "[en] mobile compatibility" is read as English whatever the query's language.
            "exp_cfgs": [
                query.ts_config if language is None else ts_config_for(language)
                for language, _ in tagged
            ],
            "named": self.named(query),
            "vocab_weight": settings.search_vocabulary_weight,
            "source_types": list(source_types) if source_types else None,
            "languages": list(languages) if languages else None,
            "breadcrumb": breadcrumb or None,
            "vec_limit": max(_MIN_VECTOR_CANDIDATES, top_k * _VECTOR_CANDIDATES_PER_HIT),
            "kw_scan": self.keyword_scan,
            "leg_sections": max(_LEG_SECTIONS, top_k),
            "k1": _K1,
            "b": _B,
            "ident_boost": _IDENT_BOOST,
            "title_boost": _TITLE_BOOST,
            "typed_title_boost": _TYPED_TITLE_BOOST,
            "wv": self._vector_weight(query.language),
            "wk": settings.search_keyword_weight,
            "rrf_k": settings.search_rrf_k,
            "entity_weights": Jsonb(_entity_weights(settings, query)),
            # Asked to import, the import entities are what the query wants: the inverse.
            "import_weight": 1 / settings.search_import_weight
            if asks_to_import(query.text)
            else settings.search_import_weight,
            "per_document": settings.search_sections_per_document
            if sections_per_document is None
            else sections_per_document,
            "min_score": min_score,
            "sections_exponent": _SECTIONS_EXPONENT,
            "top_k": top_k,
            "with_parent": expand == "parent",
        }

    def prepare(
        self, query: str, language: str | None = None, languages: Sequence[str] | None = None
    ) -> Query:
        """`query` cleaned, in `language`, else the one language filtered on, else detected."""
        if language is None and languages and len(languages) == 1:
            language = languages[0]
        return prepare_query(query, language)

    def corrected(self, query: Query) -> Query:
        """`query` with its typing errors corrected (spelling.py), or as it is."""
        corrections = self.corrections(query)
        if not corrections:
            return query
        return replace(query, text=apply_corrections(query.text, corrections))

    def corrections(self, query: Query) -> dict[str, str]:
        """`{typed word: the word meant}` for the misspelled words of `query`.

        One round trip, only for a query with a word long enough to correct; none when
        RAG_SEARCH_TYPO_CORRECTION is off.
        """
        if not self.settings.search_typo_correction or not candidate_words(query.text):
            return {}

        def spell(conn: psycopg.Connection) -> Unknown:
            self._fresh_stats(conn)
            return find_unknown(conn, query.text, query.ts_config)

        unknown = run(self._pool, spell)
        candidates = (
            vocabulary_candidates(unknown, self.vocabulary, query.language)
            if self.settings.search_vocabulary_weight > 0
            else unknown.candidates
        )
        return choose_corrections(candidates, query.language)

    def expansion(self, query: Query) -> str:
        """The iDempiere words the vocabulary adds to `query` ('' when it adds none or is off)."""
        return " ".join(words for words, _ in self.expansions(query))

    def named(self, query: Query) -> str | None:
        """The iDempiere title `query` is only another name for ("activos fijos" -> "activo"),
        searched as if typed; None when it is not one or the vocabulary is off."""
        if self.settings.search_vocabulary_weight == 0:
            return None
        return self.vocabulary.named(query.text, query.language)

    def expansions(self, query: Query) -> list[tuple[str, int]]:
        """The groups of words the vocabulary adds, each with the query words it stands for."""
        if self.settings.search_vocabulary_weight == 0:
            return []
        return self.vocabulary.expansions(query.text, query.language)

    def added_words(self, query: Query, mode: Mode | None = None) -> AddedWords:
        """The vocabulary's words a search in `mode` (default: RAG_SEARCH_MODE) adds to `query`:
        the entries of the phrases it holds, then, but in keyword mode, the entry of the phrase
        closest in meaning (`similar_entry`) unless it is one of them."""
        expansions = self.expansions(query)

        def words(groups: list[tuple[str, int]]) -> str:
            return " ".join(expansion_language(group)[1] for group, _ in groups)

        typed = words(expansions)
        if (mode or self.settings.search_mode) == "keyword" or not self._compares_phrases(query):
            return AddedWords(expansions, typed, None)
        vector = self._query_vector(query.text)
        similar = self._closest_entry(query, vector)
        if similar is None or similar.expansion in dict(expansions):
            return AddedWords(expansions, typed, None, vector)
        expansions = [*expansions, (similar.expansion, 1)]
        # A phrase sharing one word with the query is close mostly through that word ("product
        # with several vendors" for "maintain customers and vendors"): the keyword leg weighs
        # its entry among the typed words, the model does not read it.
        for_model = typed if similar.shared_words == 1 else words(expansions)
        return AddedWords(expansions, for_model, similar, vector)

    def similar_entry(self, query: Query) -> SimilarEntry | None:
        """The vocabulary entry of the phrase closest in meaning to `query`, if close enough.

        Only for a query of `_SIMILAR_MIN_WORDS` words or more (a shorter one is a name or a
        few keywords, which the typed-phrase matching serves) in a language the model knows,
        with the vocabulary on; hybrid and vector searches add it (vocabulary/phrase_vectors.py),
        the vector leg only when the phrase shares no word or several with the query.
        """
        if not self._compares_phrases(query):
            return None
        return self._closest_entry(query, self._query_vector(query.text))

    def _compares_phrases(self, query: Query) -> bool:
        settings = self.settings
        return (
            settings.search_vocabulary_weight > 0
            and settings.search_vocabulary_similarity < 1
            and len(query.text.split()) >= _SIMILAR_MIN_WORDS
            and self._model_knows(query.language)
        )

    def _closest_entry(self, query: Query, vector: NDArray[np.float32]) -> SimilarEntry | None:
        found = self._phrase_vectors.closest(
            language_prefix(query.language), vector, self.settings.search_vocabulary_similarity
        )
        if found is None:
            return None
        shared = self.vocabulary.shared_words(found.phrase, query.text, query.language)
        return replace(found, shared_words=shared)

    def _model_knows(self, language: str) -> bool:
        known = {p.strip().lower() for p in self.settings.search_model_languages.split(",")}
        prefix = language_prefix(language)
        return "*" in known or not prefix or prefix in known

    def _vector_weight(self, language: str) -> float:
        """The vector leg's weight for a query in `language`.

        An English-only model (the bundled MiniLM) embeds a Spanish or Hungarian query poorly;
        measured on the labelled set, Spanish nDCG@10 rose from 0.84 to 0.92 with the vector
        leg at a quarter weight, while English queries keep the full weight.
        """
        if self._model_knows(language):
            return self.settings.search_vector_weight
        return self.settings.search_cross_language_vector_weight

    def _query_vector(self, text: str) -> NDArray[np.float32]:
        key = f"{self.embedder.model_id}\x00{text}"
        vector = self._vectors.get(key)
        if vector is None:
            vector = self.embedder.embed_query(text).astype(np.float32)
            self._vectors.put(key, vector)
        return vector

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
        self._small_index = (state.built_chunks or 0) < _EXACT_VECTORS_BELOW
        if state.fresh or state.rebuild_now:
            return
        with self._stats_lock:
            if self._stats_refreshing:
                return
            self._stats_refreshing = True
        threading.Thread(target=self._refresh_stats, name="rag-search-stats", daemon=True).start()

    def _refresh_stats(self) -> None:
        try:
            run(self._pool, without_timeout(refresh_search_stats))
        except psycopg.Error as exc:  # the next check tries again
            logger.warning("could not refresh the search statistics: %s", exc)
        finally:
            with self._stats_lock:
                self._stats_refreshing = False

    def refresh_stats(self) -> None:
        """Rebuild the BM25 statistics now if the chunks changed (e.g. right after an ingest)."""
        run(self._pool, without_timeout(refresh_search_stats))


def _entity_weights(settings: Settings, query: Query) -> dict[str, float]:
    """RAG_SEARCH_ENTITY_WEIGHTS, without the process weight for a query that asks for one."""
    weights = settings.search_entity_weight_map
    if "process" in weights and asks_for_process(query.text):
        return {entity: weight for entity, weight in weights.items() if entity != "process"}
    return weights


def _hit(row: tuple[Any, ...], explain: bool) -> SearchHit:
    legs = (
        LegScores(
            vector_rank=None if row[14] is None else int(row[14]),
            vector_score=None if row[15] is None else float(row[15]),
            keyword_rank=None if row[16] is None else int(row[16]),
            keyword_score=None if row[17] is None else float(row[17]),
        )
        if explain
        else None
    )
    return SearchHit(
        source_type=row[0],
        source_id=row[1],
        language=row[2],
        title=row[3],
        breadcrumb=row[4],
        section_title=row[5],
        heading_path=list(row[6]),
        url=row[7],
        score=float(row[8]),
        text=row[9],
        parent_text=row[10],
        document_id=row[11],
        section_id=row[12],
        chunk_id=row[13],
        explain=legs,
    )


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
    """Search the configured index (see `Searcher.search` for the arguments)."""
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
