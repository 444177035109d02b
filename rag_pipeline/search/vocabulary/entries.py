"""Vocabulary files: their entries, the sources they name, and the words they are read as.

One entry a line, `user words|other user words<TAB>iDempiere words<TAB>source` (the format
`rag_pipeline.search.vocabulary` describes); `parse_entries` reads a file's lines into
`Entry` objects and names the file and line of anything malformed (`VocabularyError`).
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass

from rag_pipeline.search.language import fold

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# "[en] mobile compatibility": iDempiere words in the language of that code.
_TAGGED = re.compile(r"\[([a-z]{2})\]\s*(.*)")


class VocabularyError(ValueError):
    """A vocabulary file that cannot be read; the message names the file and line."""


def entry_words(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(fold(text)))


def singular_forms(word: str) -> frozenset[str]:
    """The word and what it would be with a plural ending removed (English and Spanish)."""
    forms = {word}
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        forms.add(word[:-1])
        if word.endswith("es"):
            forms.add(word[:-2])
        if word.endswith("ies"):
            forms.add(word[:-3] + "y")
    return frozenset(forms)


def expansion_language(expansion: str) -> tuple[str | None, str]:
    """An expansion's language code (None: the query's) and its words: "[en] mobile" -> en."""
    tagged = _TAGGED.fullmatch(expansion)
    if tagged is None:
        return None, expansion
    return tagged.group(1), tagged.group(2)


# What a source may name: a dictionary window, process, element, tab, field or process
# parameter by its name, or a wiki page by its title.
SOURCE_KINDS = ("window", "process", "element", "tab", "field", "parameter", "wiki")
# Between the sources of an entry whose words come from several names.
SOURCE_SEPARATOR = "; "


@dataclass(frozen=True)
class Source:
    """Where iDempiere words come from: `kind:name`, as `process:Generate Invoices`."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


def parse_sources(text: str) -> tuple[Source, ...]:
    """The sources `text` names (`kind:name; kind:name`, kinds of SOURCE_KINDS); () if any
    part is not one."""
    found: list[Source] = []
    for part in text.split(SOURCE_SEPARATOR.strip()):
        kind, colon, name = part.partition(":")
        kind, name = kind.strip(), " ".join(name.split())
        if not colon or kind not in SOURCE_KINDS or not name:
            return ()
        found.append(Source(kind, name))
    return tuple(found)


@dataclass(frozen=True)
class Entry:
    """The user phrases (each a tuple of folded words) that also mean `expansion`; `sources`
    name where that meaning comes from (none in a file without the column)."""

    phrases: tuple[tuple[str, ...], ...]
    expansion: str
    sources: tuple[Source, ...] = ()


def parse_entries(lines: Iterable[str], origin: str) -> list[Entry]:
    """The entries of one vocabulary file's lines; `origin` names the file in errors."""
    entries: list[Entry] = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) not in (2, 3):
            raise VocabularyError(
                f"{origin}:{number}: expected 'user words<TAB>iDempiere words' and an optional "
                f"'<TAB>source', found {len(fields) - 1} tabs"
            )
        sources = parse_sources(fields[2]) if len(fields) == 3 else ()
        if len(fields) == 3 and not sources:
            raise VocabularyError(
                f"{origin}:{number}: expected sources 'kind:name; kind:name' after the second "
                f"tab, kinds among {', '.join(SOURCE_KINDS)}; found {fields[2]!r}"
            )
        phrases = tuple(p for p in (entry_words(alt) for alt in fields[0].split("|")) if p)
        expansion = " ".join(fields[1].split())
        if fields[1].lstrip().startswith("[") and not _TAGGED.fullmatch(expansion):
            raise VocabularyError(
                f"{origin}:{number}: a language tag is two lowercase letters in brackets, "
                f"as in '[en] mobile'"
            )
        if not phrases or not entry_words(expansion_language(expansion)[1]):
            raise VocabularyError(f"{origin}:{number}: an entry needs words on both sides")
        entries.append(Entry(phrases, expansion, sources))
    return entries
