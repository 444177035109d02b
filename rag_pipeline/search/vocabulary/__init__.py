"""Everyday words -> the names iDempiere gives the same things: query expansion for the keyword leg.

Users ask for a "supplier", a "bin" or "who changed this field"; iDempiere calls them Business
Partner (or Vendor), Locator and Change Audit. The 22M embedding model bridges some of these
gaps and misses others, and full-text search bridges none. A vocabulary file per language
(`en.tsv`, `es.tsv` here, more from `RAG_SEARCH_VOCABULARY_DIR`) maps such words to
iDempiere's; the keyword leg also matches a query's mapped words, each at
`RAG_SEARCH_VOCABULARY_WEIGHT` of a typed word's weight, so they can lift the entity a user
means without outranking what the query itself names.

File format: one entry a line, `user words|other user words<TAB>iDempiere words`; `#` starts a
comment line. Matching is on whole words, ignoring case and accents, with simple plurals
(`suppliers`, `addresses`, `companies`, `facturas`, `proveedores`), so entries are written in
the singular.
"""

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rag_pipeline.core.languages import language_prefix

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class VocabularyError(ValueError):
    """A vocabulary file that cannot be read; the message names the file and line."""


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _words(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(_fold(text)))


def _singulars(word: str) -> frozenset[str]:
    """The word and what it would be with a plural ending removed (English and Spanish)."""
    forms = {word}
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        forms.add(word[:-1])
        if word.endswith("es"):
            forms.add(word[:-2])
        if word.endswith("ies"):
            forms.add(word[:-3] + "y")
    return frozenset(forms)


@dataclass(frozen=True)
class Entry:
    """The user phrases (each a tuple of folded words) that also mean `expansion`."""

    phrases: tuple[tuple[str, ...], ...]
    expansion: str


def parse_entries(lines: Iterable[str], origin: str) -> list[Entry]:
    """The entries of one vocabulary file's lines; `origin` names the file in errors."""
    entries: list[Entry] = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) != 2:
            raise VocabularyError(
                f"{origin}:{number}: expected 'user words<TAB>iDempiere words', "
                f"found {len(fields) - 1} tabs"
            )
        phrases = tuple(p for p in (_words(alt) for alt in fields[0].split("|")) if p)
        expansion = " ".join(fields[1].split())
        if not phrases or not _words(expansion):
            raise VocabularyError(f"{origin}:{number}: an entry needs words on both sides")
        entries.append(Entry(phrases, expansion))
    return entries


class Vocabulary:
    """Per-language entries; `expansion()` gives the iDempiere words a query also means."""

    def __init__(self, entries: Mapping[str, list[Entry]]) -> None:
        # Per language: first word -> (phrase, expansion) of every phrase starting with it.
        self._by_first: dict[str, dict[str, list[tuple[tuple[str, ...], str]]]] = {}
        for lang, found in entries.items():
            index = self._by_first.setdefault(language_prefix(lang), {})
            for entry in found:
                for phrase in entry.phrases:
                    index.setdefault(phrase[0], []).append((phrase, entry.expansion))

    @classmethod
    def load(cls, extra_dir: Path | None = None) -> "Vocabulary":
        """The bundled files, plus `<language>.tsv` files from `extra_dir` (added to them)."""
        entries: dict[str, list[Entry]] = {}
        for item in resources.files(__name__).iterdir():
            if item.name.endswith(".tsv"):
                text = item.read_text(encoding="utf-8")
                lang = item.name.removesuffix(".tsv")
                entries.setdefault(lang, []).extend(
                    parse_entries(text.splitlines(), f"rag_pipeline/search/vocabulary/{item.name}")
                )
        if extra_dir is not None:
            for path in sorted(extra_dir.glob("*.tsv")):
                try:
                    text = path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    raise VocabularyError(f"{path}: cannot be read ({exc})") from None
                lang = language_prefix(path.stem)
                entries.setdefault(lang, []).extend(parse_entries(text.splitlines(), str(path)))
        return cls(entries)

    def expansion(self, text: str, language: str) -> str:
        """The iDempiere words of the user phrases in `text`, in order of appearance."""
        return " ".join(words for words, _ in self.expansions(text, language))

    def expansions(self, text: str, language: str) -> list[tuple[str, int]]:
        """Each added group of iDempiere words with the number of query words it stands for.

        Phrases are matched left to right, the longest at each position, so "stock count"
        reads as one phrase (physical inventory), not as "stock" followed by "count".
        """
        index = self._by_first.get(language_prefix(language), {})
        forms = [_singulars(word) for word in _words(text)]
        found: dict[str, int] = {}
        start = 0
        while start < len(forms):
            matches = [
                (len(phrase), expansion)
                for form in forms[start]
                for phrase, expansion in index.get(form, ())
                if _occurs_at(phrase, forms, start)
            ]
            size = max((length for length, _ in matches), default=0)
            for length, expansion in matches:
                if length == size and expansion not in found:
                    found[expansion] = size
            start += size or 1
        return list(found.items())


def _occurs_at(phrase: tuple[str, ...], forms: list[frozenset[str]], start: int) -> bool:
    """Whether the phrase's words are the query words' forms from `start` on."""
    return start + len(phrase) <= len(forms) and all(
        word in forms[start + k] for k, word in enumerate(phrase)
    )
