"""The search vocabulary as parsed and stemmed, kept in a file for the next process.

A cold `rag search` parsed the vocabulary files (3,600 lines folded word by word) and, at its
first query in a language, stemmed every phrase of several words with Snowball in pure Python:
0.29 s and 0.46 s of a profiled 2.07 s. Both depend only on the files' text and on the code that
reads and stems them, so `search/vocabulary` keeps the result under RAG_HOME, keyed by a sha256
of that text and of that code (`cache_key`). The file is JSON, never a pickle, and is written
atomically; one that is missing, of another key, damaged (its body's sha256 is checked) or not
of the expected shape is ignored and rebuilt, never trusted (test_vocabulary_cache.py).
"""

import hashlib
import importlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple, cast

import snowballstemmer  # pyright: ignore[reportMissingTypeStubs]

from rag_pipeline.core.vocabulary import Entry

logger = logging.getLogger(__name__)

FORMAT = "rag-vocabulary-cache/1"
# The modules besides the caller's whose code decides what a vocabulary reads and stems.
_CODE = (
    "rag_pipeline.core.vocabulary",
    "rag_pipeline.core.words",
    "rag_pipeline.core.languages",
    "rag_pipeline.core.stemming",
)


def cache_key(files: Iterable[tuple[str, str]], code: Sequence[str] = ()) -> str | None:
    """The sha256 of the vocabulary `files` ((name, text), in reading order), of the source of
    the modules `code` names and `_CODE`, and of Snowball's stemmers as installed (the size and
    time of each file: hashing their 800 kB would cost a cold search 10 ms); None, so nothing
    is cached, when a module's file cannot be read."""
    digest = hashlib.sha256(FORMAT.encode())
    try:
        for name in (*code, *_CODE):
            source = Path(str(importlib.import_module(name).__file__))
            digest.update(hashlib.sha256(source.read_bytes()).digest())
        for stemmer in sorted(Path(str(snowballstemmer.__file__)).parent.glob("*.py")):
            found = stemmer.stat()
            digest.update(f"{stemmer.name} {found.st_size} {found.st_mtime_ns}\n".encode())
    except OSError:
        return None
    for name, text in files:
        digest.update(json.dumps([name, hashlib.sha256(text.encode()).hexdigest()]).encode())
    return digest.hexdigest()


class StemmedPhrase(NamedTuple):
    """A phrase of several words as stems; `content` without its function words when two or
    more words are left ("attachments in the database" -> attach databas), else ()."""

    stems: tuple[str, ...]
    content: tuple[str, ...]
    expansion: str


class VocabularyCache:
    """One cache file: the entries of every language and the stemmed phrases of some.

    Each entry or stemmed phrase is one string, its words joined by spaces (a word never holds
    one): JSON of 13,000 strings and `str.split` read in 30 ms what nested lists did in 150.
    """

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self.key = key
        # Per language: "phrase words|other phrase words<TAB>expansion" of each entry.
        self._entries: dict[str, list[str]] = {}
        # Per language prefix: "stems<TAB>content stems<TAB>expansion" of each phrase.
        self._stemmed: dict[str, list[str]] = {}

    @staticmethod
    def digest(body: bytes) -> str:
        """The sha256 the first line of the file gives of the rest."""
        return hashlib.sha256(body).hexdigest()

    def read(self) -> dict[str, list[Entry]] | None:
        """The entries of the file if it holds this key, intact; None (nothing kept) if not."""
        try:
            head, _, body = self.path.read_bytes().partition(b"\n")
            expected = {"format": FORMAT, "key": self.key, "sha256": self.digest(body)}
            if json.loads(head) != expected:
                return None
            data = cast(dict[str, dict[str, object]], json.loads(body))
            lines = {lang: _lines(found) for lang, found in data["entries"].items()}
            stemmed = {prefix: _lines(found) for prefix, found in data["stemmed"].items()}
            entries = {lang: [_entry(line) for line in found] for lang, found in lines.items()}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None
        self._entries, self._stemmed = lines, stemmed
        return entries

    def stemmed(self, prefix: str) -> list[StemmedPhrase] | None:
        """The stemmed phrases of language `prefix` the file holds, or None."""
        found = self._stemmed.get(prefix)
        if found is None:
            return None
        try:
            return [StemmedPhrase(_words(a), _words(b), c) for a, b, c in _fields(found)]
        except ValueError:
            return None

    def write(
        self,
        entries: Mapping[str, Sequence[Entry]] | None = None,
        stemmed: Mapping[str, Sequence[StemmedPhrase]] | None = None,
    ) -> None:
        """Keep `entries` (or those read) and add `stemmed`'s languages, then write the file;
        a failure to write is logged (the next process rebuilds)."""
        for lang, found in (entries or {}).items():
            self._entries[lang] = [
                "|".join(" ".join(p) for p in e.phrases) + "\t" + e.expansion for e in found
            ]
        for prefix, phrases in (stemmed or {}).items():
            self._stemmed[prefix] = [
                f"{' '.join(p.stems)}\t{' '.join(p.content)}\t{p.expansion}" for p in phrases
            ]
        body = json.dumps(
            {"entries": self._entries, "stemmed": self._stemmed},
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()
        head = json.dumps({"format": FORMAT, "key": self.key, "sha256": self.digest(body)})
        try:
            _replace(self.path, head.encode() + b"\n" + body)
        except OSError as exc:
            logger.warning("cannot keep the search vocabulary in %s: %s", self.path, exc)


def _lines(value: object) -> list[str]:
    if not isinstance(value, list) or not all(
        isinstance(v, str) for v in cast(list[object], value)
    ):
        raise TypeError("expected a list of strings")
    return cast(list[str], value)


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split(" ")) if text else ()


def _entry(line: str) -> Entry:
    phrases, tab, expansion = line.partition("\t")
    if not tab or not phrases or not expansion:
        raise ValueError(f"not an entry: {line!r}")
    return Entry(tuple(_words(phrase) for phrase in phrases.split("|")), expansion)


def _fields(lines: list[str]) -> list[list[str]]:
    found = [line.split("\t", 2) for line in lines]
    if any(len(fields) != 3 for fields in found):
        raise ValueError("expected 'stems<TAB>content stems<TAB>expansion'")
    return found


def _replace(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically: another process reads the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".vocabulary-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
