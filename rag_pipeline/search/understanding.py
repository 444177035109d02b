"""Query understanding: language, spelling, vocabulary and identifiers, as one PreparedQuery.

What a search runs is decided here, before any ranking: the cleaned text and its language
(`query.py`), typing errors corrected (`spelling.py`, one round trip to the index), the words
the search vocabulary adds (`vocabulary/`), the entry whose phrase is closest in meaning, the
query's vector (the multilingual second model's for a language the first does not read), and the
weights the query changes (a source's rules, `core/source_rules.py`). The executor (`engine.py`)
runs a PreparedQuery as it is; `rag search --explain` prints it.
"""

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from rag_pipeline.core.embedding import Embedder
from rag_pipeline.core.languages import language_prefix
from rag_pipeline.core.source_rules import SourceRanking
from rag_pipeline.core.words import fold
from rag_pipeline.search.encoder import QueryEmbedder
from rag_pipeline.search.glossary import Carried, GlossaryCache
from rag_pipeline.search.plugins import source_vocabularies
from rag_pipeline.search.queries import Mode, VectorColumn
from rag_pipeline.search.query import Query, prepare_query
from rag_pipeline.search.spelling import (
    Unknown,
    apply_corrections,
    candidate_words,
    choose_corrections,
    vocabulary_candidates,
)
from rag_pipeline.search.vocabulary import Vocabulary, expansion_language
from rag_pipeline.search.vocabulary.phrase_vectors import PhraseVectors, SimilarEntry
from rag_pipeline.settings import Settings
from rag_pipeline.settings.ranking import Ranking


@dataclass(frozen=True)
class AddedWords:
    """What the search vocabulary adds to a query in one mode."""

    expansions: list[tuple[str, int]]  # each group of words with the query words it stands for
    for_model: str  # the words the vector leg reads after the query ('' for none)
    similar: SimilarEntry | None  # the entry added for its phrase's meaning, if one was
    # The model's vector of the query alone, when the phrase lookup needed it (reused by the
    # vector leg when the model reads no added word, even with the vector cache off).
    query_vector: NDArray[np.float32] | None = None
    carried: tuple[Carried, ...] = ()  # the query's words the glossary carried over


@dataclass(frozen=True)
class PreparedQuery:
    """A query understood and ready to run: what the executor reads, --explain shows."""

    typed: str  # cleaned, as typed
    query: Query  # as searched: corrected, with its language, text-search config, identifiers
    mode: Mode
    corrections: Mapping[str, str]  # typed word -> the word searched
    added: AddedWords
    named: str | None  # the iDempiere title the whole query is another name for
    vector: NDArray[np.float32] | None  # what the vector leg compares (None in keyword mode)
    vector_weight: float
    entity_weights: Mapping[str, float]
    rule_weights: tuple[float, ...]  # per declared title rule, as this query weighs it
    # The vectors `vector` is compared with: the first model's, or the multilingual model's.
    vector_column: VectorColumn = "embedding"
    vector_model: str = ""  # the model that made `vector`

    def describe(self) -> list[tuple[str, str]]:
        """(what, value) lines for `rag search --explain`."""
        similar = self.added.similar
        return [
            ("searched as", self.query.text),
            ("language", f"{self.query.language} ({self.query.ts_config})"),
            ("identifiers", ", ".join(self.query.identifiers) or "-"),
            ("corrections", ", ".join(f"{a} -> {b}" for a, b in self.corrections.items()) or "-"),
            ("glossary", ", ".join(str(c) for c in self.added.carried) or "-"),
            ("vocabulary adds", " | ".join(w for w, _ in self.added.expansions) or "-"),
            ("model reads also", self.added.for_model or "-"),
            ("closest phrase", f"{similar.phrase!r} {similar.similarity:.2f}" if similar else "-"),
            ("title it names", self.named or "-"),
            ("vector model", self.vector_model or "-"),
            ("vector weight", f"{self.vector_weight:g}"),
            ("entity weights", ", ".join(f"{k}={v:g}" for k, v in self.entity_weights.items())),
            ("title rule weights", ", ".join(f"{w:g}" for w in self.rule_weights) or "-"),
        ]


class Understanding:
    """Turns a query into a PreparedQuery (holds the vocabulary and the query vectors)."""

    def __init__(
        self,
        settings: Settings,
        ranking: Ranking,
        embedder: QueryEmbedder | Embedder,
        rules: Sequence[SourceRanking],
        glossary: GlossaryCache | None = None,
        second: Callable[[], QueryEmbedder | None] | None = None,
    ) -> None:
        """`second` gives the multilingual model whose vectors the index holds, or None (it
        is asked at each query in a language the first model does not read)."""
        self.settings = settings
        self._second = second
        self.glossary = glossary
        self.ranking = ranking
        self.embedder = embedder
        self.rules = rules
        vocabularies = source_vocabularies()
        self.vocabulary = Vocabulary.load(
            settings.search_vocabulary_dir, vocabularies, settings.home / "vocabulary-cache"
        )
        # Repeated queries skip the model; keyed by model too (`embedder` may be replaced).
        self._vectors = functools.lru_cache(settings.search_query_cache_size)(self._embed)
        self._models: dict[str, QueryEmbedder | Embedder] = {embedder.model_id: embedder}
        self._phrase_vectors = PhraseVectors(
            self.vocabulary.phrases,
            embedder.embed_query,
            embedder.model_id,
            settings.home / "vocabulary-vectors",
            lambda language: [
                v.vectors_file(language) for v in vocabularies if language in v.vector_languages
            ],
        )

    def prepare(
        self, query: str, language: str | None = None, languages: Sequence[str] | None = None
    ) -> Query:
        """`query` cleaned, in `language`, else the one language filtered on, else detected."""
        if language is None and languages and len(languages) == 1:
            language = languages[0]
        return prepare_query(query, language, self.settings.search_max_query_chars)

    def understand(
        self, typed: Query, mode: Mode, unknown: Callable[[Query], Unknown]
    ) -> PreparedQuery:
        """Everything a search of `typed` in `mode` runs with; `unknown` asks the index which
        words it does not hold (one round trip, only for a word long enough to correct)."""
        # Spelling, the vocabulary and the model read the first words only (the keyword leg
        # reads all): their cost grows with the words, and the model truncates anyway.
        words = typed.text.split()
        head = replace(typed, text=" ".join(words[: self.settings.search_max_understood_words]))
        corrections = self.corrections(head, unknown)
        query = replace(typed, text=apply_corrections(typed.text, corrections))
        head = replace(head, text=apply_corrections(head.text, corrections))
        added = self.added_words(head, mode)
        second = self.second_model(query.language) if mode != "keyword" else None
        model = second or self.embedder
        weight = self.vector_weight(query.language)
        vector = None
        if mode != "keyword" and added.for_model:
            # The model reads the iDempiere words too: "supplier (business partner vendor)".
            vector = self.query_vector(f"{head.text} ({added.for_model})", model)
        elif mode != "keyword":
            # The phrase lookup's vector when there was one (else embedded twice, cache off).
            vector = added.query_vector if second is None else None
            if vector is None:
                vector = self.query_vector(head.text, model)
        return PreparedQuery(
            typed=typed.text,
            query=query,
            mode=mode,
            corrections=corrections,
            added=added,
            named=self.named(head),
            vector=vector,
            # The second model reads the query's language (its own weight, measured).
            vector_weight=self.ranking.second_vector_weight if second else weight,
            entity_weights=self.entity_weights(query),
            rule_weights=self.rule_weights(query),
            vector_column="embedding_ml" if second else "embedding",
            vector_model=model.model_id if vector is not None else "",
        )

    def second_model(self, language: str) -> QueryEmbedder | None:
        """The multilingual model for a query in `language`, when the first model does not
        read it and the index holds the second model's vectors; else None."""
        if self._second is None or self.model_knows(language):
            return None
        return self._second()

    def corrections(self, query: Query, unknown: Callable[[Query], Unknown]) -> dict[str, str]:
        """`{typed word: the word meant}` for the misspelled words of `query` (none when
        RAG_SEARCH_TYPO_CORRECTION is off or no word is long enough to correct)."""
        limit = self.settings.search_max_correction_letters
        if not self.settings.search_typo_correction or not candidate_words(query.text, limit):
            return {}
        found = unknown(query)
        candidates = (
            vocabulary_candidates(found, self.vocabulary, query.language)
            if self.ranking.vocabulary_weight > 0
            else found.candidates
        )
        return choose_corrections(candidates, query.language)

    def named(self, query: Query) -> str | None:
        """The iDempiere title `query` is only another name for ("activos fijos" -> "activo"),
        searched as if typed; None when it is not one or the vocabulary is off."""
        if self.ranking.vocabulary_weight == 0:
            return None
        return self.vocabulary.named(query.text, query.language)

    def expansions(self, query: Query) -> list[tuple[str, int]]:
        """The groups of words the vocabulary adds, each with the query words it stands for."""
        if self.ranking.vocabulary_weight == 0:
            return []
        return self.vocabulary.expansions(query.text, query.language)

    def added_words(self, query: Query, mode: Mode) -> AddedWords:
        """The vocabulary's words a search in `mode` adds to `query`: the entries of the
        phrases it holds, then, but in keyword mode, the entry of the phrase closest in meaning
        (`similar_entry`) unless it is one of them."""
        expansions = self.expansions(query)
        carried = self.carried(query)
        # The glossary's words weigh like the vocabulary's; the model reads those in the
        # languages it knows ("factura" -> invoice, not "invoice" -> factura for MiniLM).
        glossary = [(c.expansion, 1) for c in carried if c.expansion not in dict(expansions)]
        to_model = self.ranking.glossary_to_model > 0
        readable = [(c.expansion, 1) for c in carried if to_model and self.model_knows(c.language)]

        def words(groups: list[tuple[str, int]]) -> str:
            return " ".join(expansion_language(group)[1] for group, _ in [*groups, *readable])

        typed = words(expansions)
        if mode == "keyword" or not self.compares_phrases(query):
            return AddedWords([*expansions, *glossary], typed, None, carried=carried)
        vector = self.query_vector(query.text)
        similar = self.closest_entry(query, vector)
        if similar is None or similar.expansion in dict(expansions):
            return AddedWords([*expansions, *glossary], typed, None, vector, carried)
        expansions = [*expansions, (similar.expansion, 1)]
        # A phrase sharing one word with the query is close mostly through that word ("product
        # with several vendors" for "maintain customers and vendors"): the keyword leg weighs
        # its entry among the typed words, the model does not read it.
        for_model = typed if similar.shared_words == 1 else words(expansions)
        return AddedWords([*expansions, *glossary], for_model, similar, vector, carried)

    def carried(self, query: Query) -> tuple[Carried, ...]:
        """The query's words the dictionary's glossary carries into the index's other
        languages (none without a glossary, with the vocabulary or `glossary_words` off)."""
        most = self.ranking.glossary_words
        if self.glossary is None or self.ranking.vocabulary_weight == 0 or most == 0:
            return ()
        return tuple(self.glossary.current().carry(query.text, query.language, most))

    def compares_phrases(self, query: Query) -> bool:
        """Whether the closest vocabulary phrase in meaning is looked up: a query of
        `similar_min_words` to `similar_max_words` (a shorter one is a name or a few keywords,
        a longer one no question), in a language the model knows, with the vocabulary and
        phrase similarity on."""
        ranking = self.ranking
        return (
            ranking.vocabulary_weight > 0
            and ranking.vocabulary_similarity < 1
            and ranking.similar_min_words <= len(query.text.split()) <= ranking.similar_max_words
            and self.model_knows(query.language)
        )

    def closest_entry(self, query: Query, vector: NDArray[np.float32]) -> SimilarEntry | None:
        """The vocabulary entry of the phrase closest to `vector`, if close enough."""
        found = self._phrase_vectors.closest(
            language_prefix(query.language), vector, self.ranking.vocabulary_similarity
        )
        if found is None:
            return None
        shared = self.vocabulary.shared_words(found.phrase, query.text, query.language)
        return replace(found, shared_words=shared)

    def model_knows(self, language: str) -> bool:
        """Whether the embedding model reads `language` (RAG_SEARCH_MODEL_LANGUAGES)."""
        known = {p.strip().lower() for p in self.settings.search_model_languages.split(",")}
        prefix = language_prefix(language)
        return "*" in known or not prefix or prefix in known

    def vector_weight(self, language: str) -> float:
        """The vector leg's weight: lower for a language the model embeds poorly."""
        if self.model_knows(language):
            return self.ranking.vector_weight
        return self.ranking.cross_language_vector_weight

    def entity_weights(self, query: Query) -> dict[str, float]:
        """RAG_SEARCH_ENTITY_WEIGHTS, less the entity types the query asks for (a source's
        `wanted_entities`: a process when it asks to run or calculate)."""
        folded = fold(query.text)
        wanted = {
            entity
            for rule in self.rules
            for entity, pattern in rule.wanted_entities.items()
            if pattern.search(folded)
        }
        weights = self.settings.search_entity_weight_map
        return {entity: weight for entity, weight in weights.items() if entity not in wanted}

    def rule_weights(self, query: Query) -> tuple[float, ...]:
        """Each declared title rule's weight for `query`: its knob, inverted when the query
        asks for such documents ("import a CSV of assets" wants Import Asset)."""
        folded = fold(query.text)
        weights: list[float] = []
        for rule in (title for source in self.rules for title in source.title_weights):
            weight = float(getattr(self.ranking, rule.knob))
            weights.append(1 / weight if rule.wanted_when.search(folded) else weight)
        return tuple(weights)

    def query_vector(
        self, text: str, model: QueryEmbedder | Embedder | None = None
    ) -> NDArray[np.float32]:
        """`model`'s vector of `text` (cached; the first model by default)."""
        chosen = model or self.embedder
        self._models[chosen.model_id] = chosen
        return self._vectors(chosen.model_id, text)

    def _embed(self, model_id: str, text: str) -> NDArray[np.float32]:
        return self._models[model_id].embed_query(text).astype(np.float32)
