"""Every constant that shapes a ranking, in one frozen object with its default and why.

It sits with the settings (not in `search/`) because the settings parse RAG_SEARCH_RANKING's
overrides against it; the search engine reads it (`Ranking.from_settings`).

The defaults are what the labelled sets were measured with (docs/search-quality.md says how
much each part is worth). A knob with a setting of its own (RAG_SEARCH_VECTOR_WEIGHT, ...) is
read from it; every other one can be overridden with RAG_SEARCH_RANKING='name=value,...'.
`rag search --explain` prints the effective values.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Literal, Protocol

Fusion = Literal["tmm", "minmax", "rrf"]


def _knob(default: float, why: str, setting: str = "") -> float:
    return field(default=default, metadata={"why": why, "setting": setting})


def _count(default: int, why: str, setting: str = "") -> int:
    return field(default=default, metadata={"why": why, "setting": setting})


class RankingSettings(Protocol):
    """What `Ranking.from_settings` reads: `search_ranking` and the `search_<knob>` settings."""

    @property
    def search_ranking(self) -> str: ...


@dataclass(frozen=True)
class Ranking:
    """The ranking constants of one search (see `Ranking.from_settings`)."""

    # Candidates: how much each leg reads before fusion.
    vector_candidates_per_hit: int = _count(
        5, "chunks the vector leg fetches per hit asked for (sections collapse several)"
    )
    min_vector_candidates: int = _count(50, "the vector leg's fewest chunks")
    max_vector_candidates: int = _count(
        4000, "widest the vector leg grows when few long sections hold the nearest chunks"
    )
    leg_sections: int = _count(50, "best sections of each leg that take part in fusion")
    keyword_scan: int = _count(
        2000, "chunks the keyword leg scores at most, rarest query words first"
    )
    exact_vectors_below: int = _count(
        5000, "below this many chunks compare every vector: exact and order-independent"
    )
    # Keyword leg (BM25-style).
    k1: float = _knob(0.9, "BM25 term-frequency saturation (ts_rank saturates already)")
    b: float = _knob(0.4, "BM25 length normalisation (chunks vary little in length)")
    ident_boost: float = _knob(1.0, "an identifier found counts as one more term of its IDF")
    title_boost: float = _knob(1.0, "a title that is exactly the query gets its IDF sum again")
    typed_title_boost: float = _knob(
        0.5, "more for a title written as typed ('Verify BOM' before 'Verify BOMs')"
    )
    request_word_weight: float = _knob(
        0.5, "weight of the words a question asks with ('create', 'set up', 'registro')"
    )
    cross_language_term_weight: float = _knob(
        0.25, "a non-English query's words read as English, for English-only pages"
    )
    other_version_weight: float = _knob(
        0.5, "keyword score of a translated entry's version in another language than the query"
    )
    # Query understanding.
    vocabulary_weight: float = _knob(
        0.75, "weight of the vocabulary's words, shared by one entry's words", "vocabulary_weight"
    )
    vocabulary_similarity: float = _knob(
        0.5, "cosine from which the closest vocabulary phrase is added", "vocabulary_similarity"
    )
    similar_min_words: int = _count(
        4, "fewest query words for a phrase close in meaning (fewer: a name or keywords)"
    )
    similar_max_words: int = _count(
        48, "most query words for it (a text, not a question: saves one embedding)"
    )
    glossary_words: int = _count(
        2, "words of another language the dictionary's glossary carries a query word to (0: off)"
    )
    glossary_to_model: int = _count(
        0, "1: the model also reads the carried words of languages it knows (0: only keywords)"
    )
    # Fusion and the order of hits.
    vector_weight: float = _knob(1.0, "vector leg in fusion", "vector_weight")
    keyword_weight: float = _knob(1.0, "keyword leg in fusion", "keyword_weight")
    cross_language_vector_weight: float = _knob(
        0.25,
        "vector leg for a language the model does not know (it embeds it poorly)",
        "cross_language_vector_weight",
    )
    second_vector_weight: float = _knob(
        0.5, "vector leg when the multilingual second vector serves the query (of 0.25, 0.5, 1)"
    )
    rrf_k: int = _count(60, "reciprocal rank fusion's k (fusion 'rrf' only)", "rrf_k")
    sections_exponent: float = _knob(
        0.1, "a page of n sections scores (1 + ln n)^-this times its best section"
    )
    import_weight: float = _knob(
        0.8, "a source's import entries when the query does not ask to import", "import_weight"
    )
    sections_per_document: int = _count(
        1,
        "sections of one document before the next documents' (0: no limit)",
        "sections_per_document",
    )
    fusion: Fusion = field(
        default="tmm", metadata={"why": "scores over each leg's best", "setting": "fusion"}
    )

    @classmethod
    def from_settings(cls, settings: RankingSettings) -> "Ranking":
        """The defaults, then the search_* settings, then RAG_SEARCH_RANKING's overrides."""
        values: dict[str, object] = {
            f.name: getattr(settings, f"search_{f.metadata['setting']}")
            for f in fields(cls)
            if f.metadata["setting"]
        }
        return replace(cls(**values), **parse_overrides(settings.search_ranking))  # type: ignore[arg-type]

    def describe(self) -> list[tuple[str, object, str]]:
        """(name, value, why) of every knob; a setting-backed knob names its variable."""
        rows: list[tuple[str, object, str]] = []
        for f in fields(self):
            setting = f.metadata["setting"]
            where = f" [RAG_SEARCH_{setting.upper()}]" if setting else ""
            rows.append((f.name, getattr(self, f.name), f"{f.metadata['why']}{where}"))
        return rows


def parse_overrides(text: str) -> Mapping[str, float | int]:
    """'k1=1.2,b=0.75' as {'k1': 1.2, 'b': 0.75}; ValueError names the bad part.

    Only knobs without a setting of their own: one knob, one place to set it.
    """
    own = {f.name: f for f in fields(Ranking) if f.name != "fusion"}
    overrides: dict[str, float | int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, number = (x.strip() for x in part.partition("="))
        knob = own.get(name)
        if knob is None:
            raise ValueError(f"RAG_SEARCH_RANKING: unknown name {name!r}; one of {', '.join(own)}")
        if knob.metadata["setting"]:
            raise ValueError(
                f"RAG_SEARCH_RANKING: {name} has its own setting, "
                f"RAG_SEARCH_{knob.metadata['setting'].upper()}"
            )
        try:
            value = int(number) if knob.type is int else float(number)
        except ValueError:
            value = -1.0
        if not 0 <= value <= 1_000_000:
            raise ValueError(f"RAG_SEARCH_RANKING: {part!r} needs a number from 0 to 1,000,000")
        overrides[name] = value
    return overrides
