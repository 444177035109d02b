"""Snowball stems of single words, per language: how glossary terms and query words meet.

The dictionary's glossary is stemmed when it is built (`sources/idempiere/glossary.py`) and a
query's words when it is searched (`search/glossary.py`): both must use this one function, or
"facturas" would not find the stem "factur" stored for "factura". A language Snowball has no
stemmer for keeps its words as they are.
"""

import threading
from collections.abc import Callable
from functools import cache
from typing import Protocol, cast

import snowballstemmer  # pyright: ignore[reportMissingTypeStubs]

from rag_pipeline.core.languages import language_prefix

# Snowball's name for a language prefix.
SNOWBALL = {
    "ca": "catalan", "da": "danish", "de": "german", "en": "english", "es": "spanish",
    "fi": "finnish", "fr": "french", "hu": "hungarian", "it": "italian", "nl": "dutch",
    "no": "norwegian", "pt": "portuguese", "ro": "romanian", "ru": "russian", "sv": "swedish",
    "tr": "turkish",
}  # fmt: skip


class _Stemmer(Protocol):
    def stemWord(self, word: str) -> str: ...  # noqa: N802 (snowballstemmer's name)


@cache
def stemmer(language: str) -> Callable[[str], str]:
    """The stemming function of `language` (a code like `es_CO` or a prefix), thread-safe."""
    name = SNOWBALL.get(language_prefix(language))
    if name is None:
        return lambda word: word
    found = cast(_Stemmer, snowballstemmer.stemmer(name))  # pyright: ignore[reportUnknownMemberType]
    # A Snowball stemmer keeps the word it works on in the instance: two threads at once
    # corrupt each other's.
    lock = threading.Lock()

    def stem(word: str) -> str:
        with lock:
            return found.stemWord(word)

    return stem
