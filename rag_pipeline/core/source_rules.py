"""Ranking rules a source declares for its own documents, applied by the engine generically.

A source plug-in package may hold a `ranking` module with `RANKINGS`, a tuple of
`SourceRanking` (found by `search/plugins.py`); the engine names no source. The types live
here, below the sources that declare them and the search that applies them. Patterns on
queries are matched against the query lowercased and without accents (`core.words.fold`);
title patterns are PostgreSQL regular expressions, matched case-insensitively.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TitleWeight:
    """Documents of these entity types whose title matches weigh `Ranking.<knob>` times as much,
    and its inverse when the query matches `wanted_when` (it asks for exactly these)."""

    entity_types: tuple[str, ...]
    title_pattern: str
    knob: str
    wanted_when: re.Pattern[str]


@dataclass(frozen=True)
class SourceRanking:
    """What is specific to ranking one source's documents."""

    source_type: str
    # Its documents' sections are always the same few (a dictionary entry): no page-length factor.
    whole_documents: bool = False
    title_weights: tuple[TitleWeight, ...] = ()
    # Entity types whose weight (RAG_SEARCH_ENTITY_WEIGHTS) does not apply to a query matching
    # the pattern: it asks for such an entity.
    wanted_entities: Mapping[str, re.Pattern[str]] = field(
        default_factory=dict[str, re.Pattern[str]]
    )
