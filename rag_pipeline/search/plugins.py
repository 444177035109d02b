"""What the source plug-ins declare for search: ranking rules and vocabularies.

A source package under `rag_pipeline.sources` may hold a `ranking` module with `RANKINGS`
(`core.source_rules.SourceRanking`) and a `vocabulary` module or package with `VOCABULARIES`
(`core.vocabulary.VocabularyFiles`). The engine applies whatever is declared and names no
source.
"""

import importlib
import importlib.util
import pkgutil
from functools import cache

import rag_pipeline.sources as sources
from rag_pipeline.core.source_rules import SourceRanking
from rag_pipeline.core.vocabulary import VocabularyFiles


def _declared(module: str, name: str) -> list[object]:
    """`name` of `rag_pipeline.sources.<package>.<module>` of every source package having it."""
    found: list[object] = []
    for package in pkgutil.iter_modules(sources.__path__):
        full = f"{sources.__name__}.{package.name}.{module}"
        if package.ispkg and importlib.util.find_spec(full) is not None:
            found.extend(getattr(importlib.import_module(full), name))
    return found


@cache
def source_rankings() -> tuple[SourceRanking, ...]:
    """Every source plug-in's ranking rules (`<package>.ranking.RANKINGS`)."""
    return tuple(r for r in _declared("ranking", "RANKINGS") if isinstance(r, SourceRanking))


@cache
def source_vocabularies() -> tuple[VocabularyFiles, ...]:
    """Every source plug-in's vocabularies (`<package>.vocabulary.VOCABULARIES`)."""
    found = _declared("vocabulary", "VOCABULARIES")
    return tuple(v for v in found if isinstance(v, VocabularyFiles))
