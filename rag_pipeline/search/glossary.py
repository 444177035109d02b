"""A query's ERP words carried into the other languages the index holds, by the dictionary.

The glossary (`rag.glossary`, built at ingest from the iDempiere `_Trl` tables) says which word
each language uses for the base language's: factura → invoice, almacén → warehouse. A query in
a translated language has each of its words looked up by stem (`core/stemming.py`, as the
glossary was built) and carried into the base language; a query in the base language, into
every translated language the glossary holds. The carried words join the vocabulary's added
words (weighed like them, read with their own language's text-search config); the model reads
those in the languages it knows. `--explain` lists them ("factura → invoice").

The glossary is read once per process and kept; a search looks at its version at most every
`CHECK_INTERVAL` seconds (one small query) and reloads it when a new ingest rebuilt it.
"""

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import psycopg

from rag_pipeline.core.languages import language_prefix
from rag_pipeline.core.stemming import stemmer
from rag_pipeline.core.words import fold
from rag_pipeline.store.glossary import GlossaryRow, glossary_states, glossary_version, word_pairs

# Seconds between two looks at the stored glossary's version.
CHECK_INTERVAL = 2.0
_WORD = re.compile(r"[^\W\d_]{2,}")
T = TypeVar("T")


class Runner(Protocol):
    """Runs work on a connection (the search pool's `run`)."""

    def __call__(self, work: Callable[[psycopg.Connection], T], /) -> T: ...


@dataclass(frozen=True)
class Carried:
    """A query word and the words it was carried to in another language."""

    word: str
    targets: tuple[str, ...]
    language: str  # the language prefix of `targets` ("en")

    @property
    def expansion(self) -> str:
        """As a vocabulary expansion read in its language: "[en] invoice"."""
        return f"[{self.language}] {' '.join(self.targets)}"

    def __str__(self) -> str:
        return f"{self.word} → {' '.join(self.targets)} ({self.language})"


_Map = dict[str, dict[str, list[tuple[str, int]]]]  # into -> stem -> [(word, links)]


@dataclass(frozen=True)
class Glossary:
    """Word pairs by the language they are carried from: prefix -> {into: {stem: words}}."""

    pairs: dict[str, _Map] = field(default_factory=lambda: {})

    @classmethod
    def from_rows(cls, rows: Sequence[GlossaryRow], bases: dict[str, str]) -> "Glossary":
        """Both directions of each language's word pairs (`bases`: language -> base)."""
        pairs: dict[str, _Map] = {}

        def add(source: str, into: str, stem: str, word: str, links: int) -> None:
            found = pairs.setdefault(source, {}).setdefault(into, {}).setdefault(stem, [])
            if word not in (w for w, _ in found):
                found.append((word, links))

        for row in rows:
            language, base = language_prefix(row.language), language_prefix(bases[row.language])
            add(language, base, row.term_stem, row.target, row.links)
            add(base, language, stemmer(base)(row.target), row.term, row.links)
        for by_into in pairs.values():
            for by_stem in by_into.values():
                for words in by_stem.values():
                    words.sort(key=lambda pair: -pair[1])
        return cls(pairs)

    def carry(self, text: str, language: str, most: int = 2) -> list[Carried]:
        """Each word of `text` (in `language`) carried into every other language it can be,
        to its `most` best-aligned words there."""
        prefix = language_prefix(language)
        into = self.pairs.get(prefix, {})
        if not into:
            return []
        stem = stemmer(prefix)
        carried: list[Carried] = []
        for word in dict.fromkeys(_WORD.findall(fold(text))):
            for other, by_stem in into.items():
                targets = [w for w, _ in by_stem.get(stem(word), [])[:most] if w != word]
                if targets:
                    carried.append(Carried(word, tuple(targets), other))
        return carried


class GlossaryCache:
    """The stored glossary, read through `run` (a connection pool's), reloaded on a new
    version."""

    def __init__(self, run: Runner) -> None:
        self._run = run
        self._lock = threading.Lock()
        self._glossary = Glossary()
        self._version: str | None = None
        self._checked = 0.0

    def current(self) -> Glossary:
        """The glossary, reloaded first if its version moved (looked at every few seconds)."""
        now = time.monotonic()
        with self._lock:
            if now - self._checked < CHECK_INTERVAL:
                return self._glossary
            self._checked = now
            version = self._run(_version)
            if version != self._version:
                self._glossary = self._run(load_glossary)
                self._version = version
            return self._glossary


def _version(conn: psycopg.Connection) -> str:
    if conn.execute("SELECT to_regclass('rag.glossary_versions')").fetchone() == (None,):
        return ""  # a database not migrated yet: no glossary
    return glossary_version(conn)


def load_glossary(conn: psycopg.Connection) -> Glossary:
    """The stored glossary (empty in a database without one)."""
    if not _version(conn):
        return Glossary()
    bases = {state.language: state.base_language for state in glossary_states(conn)}
    return Glossary.from_rows(word_pairs(conn), bases)
