"""Everyday words -> the names the product gives the same things: query expansion for the
keyword leg.

Users ask for a "supplier", a "bin" or "who changed this field"; iDempiere calls them Business
Partner (or Vendor), Locator and Change Audit. The 22M embedding model bridges some of these
gaps and misses others, and full-text search bridges none. A vocabulary file per language maps
such words to the product's: the sources declare theirs (`core.vocabulary.VocabularyFiles`,
found by `search/plugins.py`; iDempiere's `en.tsv` and `es.tsv` live in
`sources/idempiere/vocabulary/`), more come from `RAG_SEARCH_VOCABULARY_DIR`. The keyword leg
also matches a query's mapped words, each at `RAG_SEARCH_VOCABULARY_WEIGHT` of a typed word's
weight, so they can lift the entity a user means without outranking what the query itself
names.

File format: one entry a line, `user words|other user words<TAB>product words<TAB>source`;
`#` starts a comment line. Matching is on whole words, ignoring case and accents, with simple
plurals (`suppliers`, `addresses`, `companies`, `facturas`, `proveedores`), so entries are
written in the singular. Product words in another language than the file's start with its
code in brackets: `celular<TAB>[en] mobile compatibility` lets a Spanish question find an
English-only wiki page, those words being read as English (`expansion_language`).

The source, optional in a folder's files and present on every bundled entry, says where the
product words come from, as `kind:name` (`Source`, kinds the declaring source names): for
iDempiere a dictionary row by its name, `window:Business Partner`, or a wiki page by its
title, `wiki:NF7.1 Migrate Storage Provider`; words from several names have several,
separated by "; " (`window:Cash Journal; window:Cashbook`). `python -m
benchmarks.eval.vocabulary_sources` finds and checks them; they change nothing in what a
query matches.
"""

import threading
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path

from rag_pipeline.core.languages import language_prefix
from rag_pipeline.core.stemming import SNOWBALL, stemmer
from rag_pipeline.core.vocabulary import (
    Entry,
    VocabularyError,
    VocabularyFiles,
    entry_words,
    expansion_language,
    parse_entries,
    singular_forms,
)
from rag_pipeline.core.vocabulary_cache import StemmedPhrase, VocabularyCache, cache_key
from rag_pipeline.core.words import fold, function_words
from rag_pipeline.search.plugins import source_vocabularies

__all__ = ["Entry", "Vocabulary", "VocabularyError", "expansion_language", "parse_entries"]


class Vocabulary:
    """Per-language entries; `expansion()` gives the iDempiere words a query also means."""

    def __init__(
        self, entries: Mapping[str, list[Entry]], cache: VocabularyCache | None = None
    ) -> None:
        # Per language: first word -> (phrase, expansion) of every phrase starting with it.
        self._by_first: dict[str, dict[str, list[tuple[tuple[str, ...], str]]]] = {}
        # Per language: the phrases of several words and their expansions, stemmed on the
        # first query in that language (or read from `cache`: stemming costs 0.2 s a language).
        self._phrases: dict[str, list[tuple[tuple[str, ...], str]]] = {}
        self._stemmed: dict[str, list[StemmedPhrase]] = {}
        self._cache = cache  # where the stems are read from, or kept when made
        self._stem_lock = threading.Lock()
        # Per language: every word of the user phrases (folded, singular).
        self._user_words: dict[str, set[str]] = {}
        for lang, found in entries.items():
            prefix = language_prefix(lang)
            index = self._by_first.setdefault(prefix, {})
            words = self._user_words.setdefault(prefix, set())
            for entry in found:
                for phrase in entry.phrases:
                    words.update(phrase)
                    index.setdefault(phrase[0], []).append((phrase, entry.expansion))
                    if len(phrase) > 1:
                        self._phrases.setdefault(prefix, []).append((phrase, entry.expansion))

    def _stemmed_phrases(self, prefix: str) -> list[StemmedPhrase]:
        """The phrases of several words of a language as stems, the longest first."""
        with self._stem_lock:
            found = self._stemmed.get(prefix)
            if found is None and self._cache is not None:
                found = self._cache.stemmed(prefix)
            if found is None:
                found = _stem_phrases(self._phrases.get(prefix, []), prefix)
                if self._cache is not None:
                    self._cache.write(stemmed={prefix: found})
            self._stemmed[prefix] = found
            return found

    @classmethod
    def load(
        cls,
        extra_dir: Path | None = None,
        declared: Sequence[VocabularyFiles] | None = None,
        cache_dir: Path | None = None,
    ) -> "Vocabulary":
        """The files the sources declare (`declared`, default: every source's), plus
        `<language>.tsv` files from `extra_dir` (added to them; their source column may name
        any kind a source declares). `cache_dir` keeps them parsed and stemmed for the next
        process, as long as neither they nor the code change (`core/vocabulary_cache.py`)."""
        if declared is None:
            declared = source_vocabularies()
        kinds = tuple(dict.fromkeys(kind for files in declared for kind in files.source_kinds))
        # (language, origin, source kinds, text) of each file, in reading order.
        texts = [
            (item.name.removesuffix(".tsv"), files.origin(item.name), files.source_kinds, text)
            for files in declared
            for item in files.tsv_files()
            for text in [item.read_text(encoding="utf-8")]
        ]
        for path in sorted(extra_dir.glob("*.tsv")) if extra_dir is not None else ():
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise VocabularyError(f"{path}: cannot be read ({exc})") from None
            texts.append((language_prefix(path.stem), str(path), kinds, text))
        named = [(" ".join((lang, origin, *k)), text) for lang, origin, k, text in texts]
        key = cache_key(named, [__name__]) if cache_dir is not None else None
        cache = None
        if cache_dir is not None and key is not None:
            cache = VocabularyCache(cache_dir / "vocabulary.json", key)
            cached = cache.read()
            if cached is not None:
                return cls(cached, cache)
        entries: dict[str, list[Entry]] = {}
        for lang, origin, source_kinds, text in texts:
            entries.setdefault(lang, []).extend(
                parse_entries(text.splitlines(), origin, source_kinds)
            )
        if cache is not None:
            cache.write(entries)
        return cls(entries, cache)

    def phrases(self, language: str) -> list[tuple[str, str]]:
        """The user phrases of two words or more of `language` (folded words joined by
        spaces), each with its entry's iDempiere words, in file order."""
        prefix = language_prefix(language)
        found = self._phrases.get(prefix, [])
        return [(" ".join(phrase), expansion) for phrase, expansion in found]

    def shared_words(self, phrase: str, text: str, language: str) -> int:
        """How many words of `phrase`, other than function words, `text` holds (as stems)."""
        prefix = language_prefix(language)
        stem = _stemmer(prefix)
        others = _skippable(prefix)

        def stems(words: str) -> set[str]:
            return {stem(word) for word in entry_words(words) if word not in others}

        return len(stems(phrase) & stems(text))

    def knows(self, word: str, language: str) -> bool:
        """True when `word` (any case, accents, singular or plural) is a word of a user phrase
        of `language`: a word people type for what iDempiere names otherwise ("bodega")."""
        words = self._user_words.get(language_prefix(language), set())
        return any(form in words for form in singular_forms(fold(word)))

    def expansion(self, text: str, language: str) -> str:
        """The iDempiere words of the user phrases in `text`, in order of appearance."""
        return " ".join(words for words, _ in self.expansions(text, language))

    def expansions(self, text: str, language: str) -> list[tuple[str, int]]:
        """Each added group of iDempiere words with the number of query words it stands for.

        Phrases are matched left to right, the longest at each position, so "stock count"
        reads as one phrase (physical inventory), not as "stock" followed by "count". Then a
        phrase of several words not found that way still matches when the stems of all its
        words are among the words left, close together, in any order: "counting the stock"
        is a "stock count", "mercancía que llegó" a "llegó mercancía". Last, a phrase's words
        other than its function words, when two or more, match the same way among the query's
        words other than its function words: "attachments in the database" matches "move the
        attachments to a disk and shrink the database".
        """
        prefix = language_prefix(language)
        words = entry_words(text)
        matches = self._in_order(words, prefix)
        taken = {i for places, _ in matches if len(places) > 1 for i in places}
        stem = _stemmer(prefix)
        left = {i: stem(word) for i, word in enumerate(words) if i not in taken}
        phrases = self._stemmed_phrases(prefix)
        matches += _match_nearby(phrases, lambda phrase: phrase.stems, left)
        # Function words neither need matching nor count as words between.
        others = _skippable(prefix)
        content = [i for i in sorted(left) if words[i] not in others]
        compact = {n: left[i] for n, i in enumerate(content)}
        matches += [
            ([content[n] for n in places], expansion)
            for places, expansion in _match_nearby(phrases, lambda phrase: phrase.content, compact)
        ]
        # A word read as part of a phrase does not also stand for an entry of its own.
        in_phrases = {i for places, _ in matches if len(places) > 1 for i in places}
        found: dict[str, int] = {}
        for places, expansion in sorted(matches, key=lambda match: min(match[0])):
            if len(places) > 1 or places[0] not in in_phrases:
                found.setdefault(expansion, len(places))
        return list(found.items())

    def named(self, text: str, language: str) -> str | None:
        """The iDempiere words of the one entry `text` consists of, or None.

        "activos fijos" is nothing but a user's name for what iDempiere calls "Activo", so a
        dictionary entry of that title is what it looks for (queries.py, kw_titled), the way a
        typed title is. Only phrases found as typed count, and only words of the query's
        language's function-word list may stand outside them ("the chart of accounts").
        """
        prefix = language_prefix(language)
        words = entry_words(text)
        matches = self._in_order(words, prefix)
        expansions = {expansion for _, expansion in matches}
        if len(expansions) != 1 or expansion_language(next(iter(expansions)))[0] is not None:
            return None
        covered = {i for places, _ in matches for i in places}
        others = function_words(language)
        if all(i in covered or word in others for i, word in enumerate(words)):
            return expansions.pop()
        return None

    def _in_order(self, words: tuple[str, ...], prefix: str) -> list[tuple[list[int], str]]:
        """The phrases found as typed, left to right, the longest at each position."""
        index = self._by_first.get(prefix, {})
        forms = [singular_forms(word) for word in words]
        matches: list[tuple[list[int], str]] = []
        start = 0
        while start < len(forms):
            here = [
                (len(phrase), expansion)
                for form in sorted(forms[start])  # a set's order follows the hash seed
                for phrase, expansion in index.get(form, ())
                if _occurs_at(phrase, forms, start)
            ]
            size = max((length for length, _ in here), default=0)
            places = list(range(start, start + size))
            matches += [(places, expansion) for length, expansion in here if length == size]
            start += size or 1
        return matches


@cache
def _skippable(prefix: str) -> frozenset[str]:
    """The function words a phrase matched by its stems may do without ("pay the invoice",
    "pay my invoices"), except a negation: "email not sending" is not "send an email"."""
    return function_words(prefix) - _NEGATIONS


_NEGATIONS = frozenset({"not", "no", "nor", "ni", "sin", "never", "nunca"})

# How many other words may stand between the words of a phrase matched by its stems.
_GAP = 2


@cache
def _stemmer(prefix: str) -> Callable[[str], str]:
    """The language's stemming function (`core/stemming.py`), safe to call from several
    threads at once; a language Snowball has no stemmer for keeps its words as they are.

    It stems a word's shortest singular form (`singular_forms`): Snowball's Spanish stems
    "almacenes" to almacen but "almacén" to almac, so a phrase written in the plural would
    miss a query in the singular. Of two forms as short ("families": famili, family), the
    first in alphabetical order, not the first a set yields, which depends on the process's
    hash seed.
    """
    if prefix not in SNOWBALL:
        return lambda word: word
    stem = stemmer(prefix)
    return lambda word: stem(min(singular_forms(word), key=lambda form: (len(form), form)))


def _stem_phrases(phrases: list[tuple[tuple[str, ...], str]], prefix: str) -> list[StemmedPhrase]:
    """`phrases` as stems (each distinct word stemmed once), the longest first."""
    stem = _stemmer(prefix)
    others = _skippable(prefix)
    stems: dict[str, str] = {}

    def stemmed(words: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(stems.get(word) or stems.setdefault(word, stem(word)) for word in words)

    found: list[StemmedPhrase] = []
    for phrase, expansion in phrases:
        content = tuple(word for word in phrase if word not in others)
        found.append(
            StemmedPhrase(
                stemmed(phrase),
                stemmed(content) if len(content) >= 2 and content != phrase else (),
                expansion,
            )
        )
    found.sort(key=lambda phrase: -len(phrase.stems))
    return found


def _match_nearby(
    phrases: list[StemmedPhrase],
    stems_of: Callable[[StemmedPhrase], tuple[str, ...]],
    left: dict[int, str],
) -> list[tuple[list[int], str]]:
    """The phrases whose stems (`stems_of`) stand close together among `left` (position ->
    stem), in `phrases`' order; the positions each takes are removed from `left`."""
    present = set(left.values())
    found: list[tuple[list[int], str]] = []
    for phrase in phrases:
        stems = stems_of(phrase)
        if not stems or not present.issuperset(stems):
            continue
        places = _nearby(stems, left)
        if places:
            found.append((places, phrase.expansion))
            for i in places:
                del left[i]
    return found


def _nearby(stems: tuple[str, ...], left: Mapping[int, str]) -> list[int]:
    """Positions of `left` holding every stem, within len(stems) + _GAP words; [] if none."""
    spots = [[i for i, word in left.items() if word == stem] for stem in stems]
    if not all(spots):
        return []
    for first in sorted(set(spots[0])):
        places: list[int] = []
        for candidates in spots:
            near = [i for i in candidates if abs(i - first) <= len(stems) + _GAP - 1]
            near = [i for i in near if i not in places]
            if not near:
                break
            places.append(near[0])
        else:
            if max(places) - min(places) < len(stems) + _GAP:
                return places
    return []


def _occurs_at(phrase: tuple[str, ...], forms: list[frozenset[str]], start: int) -> bool:
    """Whether the phrase's words are the query words' forms from `start` on."""
    return start + len(phrase) <= len(forms) and all(
        word in forms[start + k] for k, word in enumerate(phrase)
    )
