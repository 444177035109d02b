"""Typing errors in a query: a misspelled word is read as the word it was meant as.

"comission rules", "requisision de materiales", "conciliasion bancaria": the keyword leg found
nothing for the misspelled word, and the model embedded a word it hardly knew. A query word of
at least `MIN_LETTERS` letters (and at most RAG_SEARCH_MAX_CORRECTION_LETTERS: a word of n
letters has about 55n one-edit variants, 104,000 for 2,000 letters) is a candidate when neither
the index (in any of its languages' forms) nor the search vocabulary's user words ("bodega",
"pedido") hold it. Its possible corrections are the words one edit away (a letter dropped,
added, replaced, or two neighbours swapped) that the index holds in at least `MIN_CHUNKS`
chunks (`rag.one_edit_variants`, m006) or that are user words of the vocabulary. Being absent
from both does not make a word misspelled ("night", "morosos" are words our corpus lacks), so
how common a word is in its language (wordfreq's Zipf scale, in the query's language or
English, whichever is higher)
decides:
- a word rarer than `RARE_WORD_ZIPF` is corrected to its most common possible correction, if
  that is at least `MORE_COMMON_BY` more common ("comission" 2.1 -> "commission" 4.9);
- a word unknown to the language altogether (Zipf 0: "requisision", "boodega") is corrected to
  a vocabulary word if one is that close, else to the indexed word in most chunks, if that is
  a word of the language or indexed as typed (the unaccented "requisicion" is not in
  wordfreq, but the index holds it as is).
Both legs and the vocabulary then read the corrected text. Identifiers (`C_BPartner_ID`,
`DocStatus`) and words with digits are never changed.

One round trip, before the query is embedded, and only for a query with a candidate word.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Protocol

import psycopg

from rag_pipeline.core.languages import TS_CONFIGS, language_prefix

# Shorter words have too many neighbours one edit away to guess which was meant.
MIN_LETTERS = 5
# Longer words are searched as typed (the default of RAG_SEARCH_MAX_CORRECTION_LETTERS).
MAX_LETTERS = 24
# Unknown words corrected at most, the first ones of the query (of the 1,394 labelled questions
# none has more than six).
MAX_UNKNOWN = 8
# A word rarer than this in its language (Zipf scale) may be misspelled; a correction must be
# this much more common (1: ten times) unless the typed word is no word of the language at all.
RARE_WORD_ZIPF = 3.0
MORE_COMMON_BY = 1.0
# A word in one chunk only is as likely a typing error of the corpus as the word meant.
MIN_CHUNKS = 2

# Every configuration documents may be indexed with (a word known in any is no typing error).
ALL_CONFIGS = sorted({*TS_CONFIGS.values(), "simple"})
_TOKEN = re.compile(r"[^\s/\\]+")
_EDGES = "¿?¡!.,;:\"'()[]{}«»“”‘’…"

_STATEMENT = """
WITH words AS (
    SELECT w, min(n) AS n FROM unnest(%(words)s::text[]) WITH ORDINALITY AS x (w, n) GROUP BY w
),
unknown AS MATERIALIZED (
    -- Words the index holds in none of the languages it may hold: a Spanish word in a query
    -- read as English ("conciliación bancaria") is no English typing error. Stop words (no
    -- lexeme in the query's language) are not asked about. The first `max_unknown` only: a
    -- query of many unknown words is no typing error, and each costs ~55 variants a letter.
    SELECT w FROM words
    WHERE to_tsvector(%(cfg)s::regconfig, w) <> ''::tsvector
      AND NOT EXISTS (
          SELECT 1 FROM unnest(%(configs)s::regconfig[]) AS c (config)
          CROSS JOIN LATERAL unnest(to_tsvector(c.config, w)) AS l
          JOIN rag.term_stats s ON s.lexeme = l.lexeme)
    ORDER BY n
    LIMIT %(max_unknown)s
)
SELECT u.w, v.variant, l.lexeme = v.variant, max(s.df)
FROM unknown u
CROSS JOIN LATERAL rag.one_edit_variants(u.w) AS v (variant)
CROSS JOIN LATERAL unnest(to_tsvector(%(cfg)s::regconfig, v.variant)) AS l
JOIN rag.term_stats s ON s.lexeme = l.lexeme
WHERE s.df >= %(min_chunks)s
GROUP BY u.w, v.variant, l.lexeme
UNION ALL
SELECT w, NULL, false, 0 FROM unknown
"""
_LETTERS = "abcdefghijklmnopqrstuvwxyzñ"  # as rag.one_edit_variants (m006)


@dataclass(frozen=True)
class Candidate:
    """A possible correction: a word one edit away from a word the index does not hold,
    held by the index or listed by the vocabulary."""

    word: str  # as typed, lowercased
    variant: str  # the word one edit away
    verbatim: bool  # the index holds the variant as it is (its lexeme is the variant)
    chunks: int  # chunks holding the variant's lexeme (0 for a vocabulary word)
    in_vocabulary: bool = False  # a user word of the search vocabulary


@dataclass(frozen=True)
class Unknown:
    """The words of a query that the index does not hold, with its possible corrections."""

    words: list[str]
    candidates: list[Candidate]


def candidate_words(text: str, max_letters: int = MAX_LETTERS) -> list[str]:
    """The words of `text` that typo correction may look at, lowercased.

    Plain words of letters only, MIN_LETTERS to `max_letters` long; not identifiers (an
    underscore, a digit, or a capital after the first letter: `M_Locator`, `DocStatus`,
    `C_Order_ID`).
    """
    words: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group().strip(_EDGES)
        if (
            MIN_LETTERS <= len(token) <= max_letters
            and token.isalpha()
            and not _has_inner_capital(token)
        ):
            words.append(token.lower())
    return words


def _has_inner_capital(token: str) -> bool:
    return any(letter.isupper() for letter in token[1:]) and not token.isupper()


def find_unknown(
    conn: psycopg.Connection, text: str, ts_config: str, max_letters: int = MAX_LETTERS
) -> Unknown:
    """The words of `text` the index does not hold, with the indexed words one edit away."""
    words = candidate_words(text, max_letters)
    if not words:
        return Unknown([], [])
    rows = conn.execute(
        _STATEMENT,
        {
            "words": words,
            "cfg": ts_config,
            "configs": ALL_CONFIGS,
            "min_chunks": MIN_CHUNKS,
            "max_unknown": MAX_UNKNOWN,
        },
    ).fetchall()
    return Unknown(
        [str(w) for w, variant, _, _ in rows if variant is None],
        [Candidate(str(w), str(v), bool(verbatim), int(df)) for w, v, verbatim, df in rows if v],
    )


def one_edit_variants(word: str) -> set[str]:
    """The strings one edit from `word` (as `rag.one_edit_variants` in SQL)."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    return (
        {left + right[1:] for left, right in splits if right}
        | {left + right[1] + right[0] + right[2:] for left, right in splits if len(right) > 1}
        | {left + letter + right[1:] for left, right in splits if right for letter in _LETTERS}
        | {left + letter + right for left, right in splits for letter in _LETTERS}
    )


class UserWords(Protocol):
    """The search vocabulary, as typo correction asks it."""

    def knows(self, word: str, language: str) -> bool: ...


def vocabulary_candidates(
    unknown: Unknown, vocabulary: UserWords, language: str
) -> list[Candidate]:
    """`unknown`'s candidates, less the words the vocabulary knows, plus its words one edit
    away from the others."""
    known = {word for word in unknown.words if vocabulary.knows(word, language)}
    found = [c for c in unknown.candidates if c.word not in known]
    for word in unknown.words:
        if word in known:
            continue
        for variant in sorted(one_edit_variants(word)):
            if vocabulary.knows(variant, language):
                found.append(Candidate(word, variant, True, 0, in_vocabulary=True))
    return found


def choose_corrections(candidates: Sequence[Candidate], language: str) -> dict[str, str]:
    """`{typed word: correction}` for the candidates' words that are misspelled (see above)."""
    by_word: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        by_word.setdefault(candidate.word, []).append(candidate)
    corrections: dict[str, str] = {}
    for word, options in by_word.items():
        typed = word_zipf(word, language)
        if typed >= RARE_WORD_ZIPF:
            continue
        scored = [(word_zipf(option.variant, language), option) for option in options]
        if typed > 0:
            zipf, best = max(
                scored,
                key=lambda item: (item[0], item[1].in_vocabulary, item[1].chunks, item[1].variant),
            )
            if zipf >= typed + MORE_COMMON_BY:
                corrections[word] = best.variant
            continue
        usable = [(zipf, option) for zipf, option in scored if zipf > 0 or option.verbatim]
        if usable:
            _, best = max(
                usable,
                key=lambda item: (item[1].in_vocabulary, item[1].chunks, item[0], item[1].variant),
            )
            corrections[word] = best.variant
    return corrections


def word_zipf(word: str, language: str) -> float:
    """How common `word` is (Zipf scale: 0 unknown, 3 once per million words, 6 very common)
    in `language` or in English, whichever is higher."""
    from wordfreq import zipf_frequency  # 0.1 s: only when needed

    prefix = language_prefix(language)
    codes = {"en", prefix} & _wordfreq_languages()
    return max(zipf_frequency(word, code) for code in codes)


@cache
def _wordfreq_languages() -> frozenset[str]:
    """The languages wordfreq has lists for (it reads its data folder on every call)."""
    from wordfreq import available_languages

    return frozenset(available_languages())


def apply_corrections(text: str, corrections: Mapping[str, str]) -> str:
    """`text` with each corrected word replaced (any case), everything else as typed."""
    if not corrections:
        return text

    def fix(match: re.Match[str]) -> str:
        token = match.group()
        stripped = token.strip(_EDGES)
        replacement = corrections.get(stripped.lower())
        if replacement is None or not stripped:
            return token
        start = token.index(stripped)
        return token[:start] + replacement + token[start + len(stripped) :]

    return _TOKEN.sub(fix, text)
