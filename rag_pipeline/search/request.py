"""What a search asks for besides its query (`SearchRequest`), and the search statement's bind
parameters built from it and a PreparedQuery, named like the SQL parts (`queries.py`) read them.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from psycopg.types.json import Jsonb

from rag_pipeline.core.languages import language_prefix, ts_config_for
from rag_pipeline.core.source_rules import SourceRanking
from rag_pipeline.core.stages import CHUNKS
from rag_pipeline.core.words import query_stop_words, request_words
from rag_pipeline.search.queries import Fusion
from rag_pipeline.search.understanding import PreparedQuery
from rag_pipeline.search.vocabulary import expansion_language
from rag_pipeline.settings.ranking import Ranking

Expand = Literal["parent", "chunk"]


@dataclass(frozen=True)
class SearchRequest:
    """What a search asks for besides the query: filters, size and shape of the hits."""

    top_k: int
    source_types: Sequence[str] | None
    languages: Sequence[str] | None
    breadcrumb: str | None
    min_score: float | None
    expand: Expand
    sections_per_document: int | None
    fusion: Fusion


def statement_parameters(
    prepared: PreparedQuery,
    request: SearchRequest,
    ranking: Ranking,
    rules: Sequence[SourceRanking],
    keyword_scan: int,
) -> dict[str, Any]:
    """The statement's bind parameters, named like the SQL parts read them."""
    query = prepared.query
    tagged = [expansion_language(words) for words, _ in prepared.added.expansions]
    title_rules = [(s.source_type, t) for s in rules for t in s.title_weights]
    per_document = request.sections_per_document
    return {
        "query_vector": prepared.vector,
        "ts_config": query.ts_config,
        "query_language": language_prefix(query.language),
        "query_text": query.text,
        "identifiers": list(query.identifiers),
        "request_words": request_words(query.language),
        "query_stop_words": query_stop_words(query.text, query.language),
        "cross_ts_config": None if language_prefix(query.language) == "en" else "english",
        "added_texts": [words for _, words in tagged],
        "added_covers": [covers for _, covers in prepared.added.expansions],
        # "[en] mobile compatibility" is read as English whatever the query's language.
        "added_ts_configs": [
            query.ts_config if language is None else ts_config_for(language)
            for language, _ in tagged
        ],
        "named": prepared.named,
        "source_types": list(request.source_types) if request.source_types else None,
        "languages": list(request.languages) if request.languages else None,
        "breadcrumb": request.breadcrumb or None,
        "vector_candidates": max(
            ranking.min_vector_candidates, request.top_k * ranking.vector_candidates_per_hit
        ),
        "keyword_scan": keyword_scan,
        "leg_sections": max(ranking.leg_sections, request.top_k),
        "vector_weight": prepared.vector_weight,
        "entity_weights": Jsonb(prepared.entity_weights),
        "rule_sources": [source for source, _ in title_rules],
        "rule_entity_types": [",".join(rule.entity_types) for _, rule in title_rules],
        "rule_patterns": [rule.title_pattern for _, rule in title_rules],
        "rule_weights": list(prepared.rule_weights),
        "whole_document_sources": [s.source_type for s in rules if s.whole_documents],
        "sections_per_document": ranking.sections_per_document
        if per_document is None
        else per_document,
        "min_score": request.min_score,
        "top_k": request.top_k,
        "with_parent": request.expand == "parent",
        "chunks_stage": CHUNKS,
    } | {name: getattr(ranking, name) for name in _RANKING_PARAMETERS}


# Ranking knobs the SQL reads under their own names.
_RANKING_PARAMETERS = (
    "k1",
    "b",
    "ident_boost",
    "title_boost",
    "typed_title_boost",
    "request_word_weight",
    "cross_language_term_weight",
    "other_version_weight",
    "vocabulary_weight",
    "keyword_weight",
    "rrf_k",
    "sections_exponent",
)
