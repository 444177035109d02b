"""A query as the search legs need it: validated, sanitized like documents, with its language.

Decision: characters that documents lose in the sanitizer (NUL, C0/C1 controls, lone
surrogates, noncharacters) are repaired the same way here, so a query pasted from a document
still matches it; what cannot be a useful query (nothing left, or more than MAX_QUERY_CHARS)
is a ValueError with a message a user can act on. The length is checked first, so a huge
query is refused before any work (RAG_SEARCH_MAX_QUERY_CHARS).
"""

import re
import unicodedata
from dataclasses import dataclass

from rag_pipeline.core.languages import ts_config_for
from rag_pipeline.core.words import detect_language
from rag_pipeline.search.identifiers import query_identifiers

MAX_QUERY_CHARS = 2000  # the default of RAG_SEARCH_MAX_QUERY_CHARS
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ufdd0-\ufdef\ufffe\uffff]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class QueryError(ValueError):
    """A query that cannot be searched; the message says why."""


@dataclass(frozen=True)
class Query:
    """A cleaned query with what the keyword leg needs."""

    text: str
    language: str  # detected, or given by the caller
    ts_config: str  # PostgreSQL text-search configuration for the keyword leg
    identifiers: tuple[str, ...]  # identifier terms (see identifiers.py)


def check_length(text: str, max_chars: int = MAX_QUERY_CHARS) -> None:
    """Raise QueryError for a query longer than `max_chars` (RAG_SEARCH_MAX_QUERY_CHARS)."""
    if len(text) > max_chars:
        raise QueryError(
            f"the query has {len(text):,} characters; at most {max_chars:,} are searched "
            "(RAG_SEARCH_MAX_QUERY_CHARS)"
        )


def clean_query_text(text: str, max_chars: int = MAX_QUERY_CHARS) -> str:
    """Sanitize a query like a document; raise QueryError if nothing searchable is left."""
    if not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise QueryError(f"the query must be a string, not {type(text).__name__}")
    check_length(text, max_chars)
    # Pairs left in a str by 'surrogatepass' decoding join up; a lone one becomes U+FFFD.
    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    text = _SURROGATE.sub("\ufffd", text)
    text = _CONTROLS.sub(" ", text.replace("\r\n", "\n"))
    text = unicodedata.normalize("NFC", text)
    text = " ".join(text.split())
    if not text.replace("\ufffd", "").strip():
        raise QueryError("the query is empty: give some words to search for")
    return text


def prepare_query(
    text: str, language: str | None = None, max_chars: int = MAX_QUERY_CHARS
) -> Query:
    """Clean `text` and resolve its language (`language` wins over detection)."""
    cleaned = clean_query_text(text, max_chars)
    resolved = language or detect_language(cleaned)
    return Query(
        text=cleaned,
        language=resolved,
        ts_config=ts_config_for(resolved),
        identifiers=tuple(query_identifiers(cleaned)),
    )
