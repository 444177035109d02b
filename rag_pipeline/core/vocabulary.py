"""Vocabulary files: what a source declares, their entries, the sources they name, the words.

A source plug-in package may hold a `vocabulary` package with `VOCABULARIES`, a tuple of
`VocabularyFiles` (found by `search/plugins.py`, like its ranking rules): `<language>.tsv`
files and the bundled model's vectors of their phrases. One entry a line, `user words|other
user words<TAB>product words<TAB>source` (the format `rag_pipeline.search.vocabulary`
describes); `parse_entries` reads a file's lines into `Entry` objects and names the file and
line of anything malformed (`VocabularyError`). The types live here, below the sources that
declare them and the search that reads them.
"""

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from rag_pipeline.core.words import fold

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


@dataclass(frozen=True)
class VocabularyFiles:
    """A source's vocabulary: the `<language>.tsv` files of package `package`, the kinds their
    source column may name (`Source.kind`), and the languages whose phrases' vectors for the
    bundled model ship beside them (`<language>.vectors.npz`)."""

    package: str
    source_kinds: tuple[str, ...]
    vector_languages: tuple[str, ...] = ()

    def tsv_files(self) -> list[Traversable]:
        """The package's vocabulary files, in the order the package folder lists them."""
        return [f for f in resources.files(self.package).iterdir() if f.name.endswith(".tsv")]

    def origin(self, name: str) -> str:
        """How errors name one of its files: its path inside the project."""
        return f"{self.package.replace('.', '/')}/{name}"

    def vectors_file(self, language: str) -> Path:
        """Where the package keeps the bundled model's vectors of `language`'s phrases."""
        return Path(str(resources.files(self.package).joinpath(f"{language}.vectors.npz")))


# Between the sources of an entry whose words come from several names.
SOURCE_SEPARATOR = "; "


@dataclass(frozen=True)
class Source:
    """Where iDempiere words come from: `kind:name`, as `process:Generate Invoices`."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


def parse_sources(text: str, kinds: Sequence[str]) -> tuple[Source, ...]:
    """The sources `text` names (`kind:name; kind:name`, each kind one of `kinds`); () if any
    part is not one."""
    found: list[Source] = []
    for part in text.split(SOURCE_SEPARATOR.strip()):
        kind, colon, name = part.partition(":")
        kind, name = kind.strip(), " ".join(name.split())
        if not colon or kind not in kinds or not name:
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


def parse_entries(lines: Iterable[str], origin: str, kinds: Sequence[str]) -> list[Entry]:
    """The entries of one vocabulary file's lines; `origin` names the file in errors, `kinds`
    are the kinds its source column may name."""
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
        sources = parse_sources(fields[2], kinds) if len(fields) == 3 else ()
        if len(fields) == 3 and not sources:
            raise VocabularyError(
                f"{origin}:{number}: expected sources 'kind:name; kind:name' after the second "
                f"tab, kinds among {', '.join(kinds)}; found {fields[2]!r}"
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
