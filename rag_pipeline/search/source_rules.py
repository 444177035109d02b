"""Ranking rules a source declares for its own documents, applied by the engine generically.

A source plug-in package may hold a `ranking` module with `RANKINGS`, a tuple of
`SourceRanking`; the engine names no source. Patterns on queries are matched against the query
lowercased and without accents (`language.fold`); title patterns are PostgreSQL regular
expressions, matched case-insensitively.
"""

import importlib
import importlib.util
import pkgutil
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache


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


@cache
def source_rankings() -> tuple[SourceRanking, ...]:
    """Every source plug-in's declarations (`rag_pipeline.sources.<package>.ranking.RANKINGS`)."""
    import rag_pipeline.sources as sources

    found: list[SourceRanking] = []
    for module in pkgutil.iter_modules(sources.__path__):
        name = f"{sources.__name__}.{module.name}.ranking"
        if module.ispkg and importlib.util.find_spec(name) is not None:
            found.extend(importlib.import_module(name).RANKINGS)
    return tuple(found)
