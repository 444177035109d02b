"""What the chunker is told: its settings, the token counter it uses and the context header."""

import functools
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

# 4: a short section with a titled heading of its own and text under it is no longer folded.
CHUNKER_VERSION = "4"
# Chunking is linear, but a megabyte of empty headings still costs a minute of parsing.
DEFAULT_TIME_BUDGET_SECONDS = 30.0

_HEADER_SEPARATOR = " › "
# Breadcrumbs arrive as "A > B > C" (seed ADR-021) or already joined with "›".
_BREADCRUMB_SPLIT = re.compile(r"\s*[›»]\s*|\s+>\s+")


@dataclass(frozen=True)
class ChunkingSettings:
    """How documents are cut into sections and chunks.

    Attributes:
        section_levels: Heading levels that start a new section (a parent).
        target_tokens: Size a chunk aims for, in model tokens, header and special tokens
            included.
        max_tokens: Hard limit: the model's max sequence length, header and special tokens
            included. Text past it would be silently truncated by the model.
        overlap_sentences: Whole sentences repeated from the end of the previous chunk of the
            same section (0 = none).
        min_section_tokens: Sections smaller than this merge with a neighbour, except one
            with a titled heading of its own and text under it (`sections.keeps_its_title`).
        max_chunks: A document that would need more chunks fails with the reason (a
            megabyte of "#" or of table rows must not cost thousands of embeddings).
        max_chunk_chars: Most characters in one chunk's embedded text. A word the tokenizer
            does not know is one token however long, so without it a 5 MB "word" would be one
            6-token chunk; text is counted as at least `max_tokens` per `max_chunk_chars`.
    """

    section_levels: tuple[int, ...] = (1, 2)
    target_tokens: int = 200
    max_tokens: int = 256
    overlap_sentences: int = 1
    min_section_tokens: int = 24
    max_chunks: int = 2000
    max_chunk_chars: int = 6000

    def __post_init__(self) -> None:
        """Reject settings that cannot produce a valid chunking."""
        if not self.section_levels or any(lv not in range(1, 7) for lv in self.section_levels):
            raise ValueError(f"section_levels must be heading levels 1-6: {self.section_levels}")
        if self.max_tokens < 8:
            raise ValueError(f"max_tokens is too small to hold any text: {self.max_tokens}")
        if self.target_tokens < 1:
            raise ValueError(f"target_tokens must be positive: {self.target_tokens}")
        if self.overlap_sentences < 0 or self.min_section_tokens < 0:
            raise ValueError("overlap_sentences and min_section_tokens must not be negative")
        if self.max_chunks < 1 or self.max_chunk_chars < 1:
            raise ValueError(
                "max_chunks and max_chunk_chars must be positive: "
                f"{self.max_chunks}, {self.max_chunk_chars}"
            )

    def fingerprint(self) -> str:
        """Return a stable hash of these settings and the algorithm version.

        Stored with the chunks: when it changes, documents are re-chunked.
        """
        return _fingerprint(self)


@functools.cache
def _fingerprint(settings: ChunkingSettings) -> str:
    # Every chunked record carries it: computed once per settings, not once per document.
    payload = json.dumps({**asdict(settings), "chunker_version": CHUNKER_VERSION}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


DEFAULT_SETTINGS = ChunkingSettings()


class ChunkLimitError(ValueError):
    """The document needs more chunks than `max_chunks`; str(error) says so and what to set."""


class TokenCounter(Protocol):
    """Counts the embedding model's tokens of a text."""

    def __call__(self, text: str) -> int:
        """Return the number of tokens for `text`, special tokens included, no truncation."""
        ...


def context_header(
    title: str, breadcrumb: str, heading_path: Sequence[str], *, omit: str = ""
) -> str:
    """Build the short context line put in front of every chunk's embedded text.

    Args:
        title: The document title.
        breadcrumb: Where the document lives ("KB > Area > Page"); may be empty.
        heading_path: Titles of the section's enclosing headings, outermost first.
        omit: A heading the chunk itself starts with: repeating it in the header would only
            weigh it twice in a short text (measured: it costs retrieval quality).

    Returns:
        The parts joined with " › " and followed by a blank line, empty parts and repeats
        (case-insensitive) left out; "" when nothing is left.
    """
    parts = [title, *_BREADCRUMB_SPLIT.split(breadcrumb), *heading_path]
    seen: set[str] = {" ".join(omit.split()).casefold()} if omit.strip() else set()
    kept: list[str] = []
    for part in parts:
        clean = " ".join(part.split())
        key = clean.casefold()
        if clean and key not in seen:
            seen.add(key)
            kept.append(clean)
    return _HEADER_SEPARATOR.join(kept) + "\n\n" if kept else ""
