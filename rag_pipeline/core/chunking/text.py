"""The document being chunked: its text, line index, sentences and token costs.

Everything is cut from the original text by offsets, never re-rendered, so a chunk reads
exactly like its source and its offsets point back into the document.
"""

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from rag_pipeline.core.chunking.settings import ChunkingSettings, TokenCounter
from rag_pipeline.core.time_budget import Deadline

# markdown-it splits lines exactly like this (after its own normalisation), so line numbers
# in token maps match these offsets even for CR or CRLF documents.
NEWLINE = re.compile(r"\r\n|\r|\n")
_SENTENCE_END = re.compile(r"[.!?…][\"'”’»)\]]*(\s+)")


@dataclass(frozen=True, slots=True)
class Piece:
    """A slice of the document being packed: a block, part of one, or a packed run.

    `prefix`/`suffix` are synthetic text around the slice (a re-opened code fence, a repeated
    table header); `tokens` counts them too but never the special tokens.
    """

    start: int
    end: int
    tokens: int
    block: int
    kind: str
    split_as: str = "node"
    node: tuple[int, int] | None = None
    heading: bool = False
    prefix: str = ""
    suffix: str = ""


class DocumentText:
    """One document's text with its line index and cached token counts.

    Every token count checks the deadline: counting is what every step of chunking does.
    """

    def __init__(
        self,
        doc: str,
        count_tokens: TokenCounter,
        settings: ChunkingSettings,
        deadline: Deadline | None = None,
    ) -> None:
        self.doc = doc
        self.deadline = deadline or Deadline()
        self.count = count_tokens
        self.settings = settings
        self.specials = count_tokens("")
        self._span_cache: dict[tuple[int, int], int] = {}
        self._text_cache: dict[str, int] = {}
        self.line_starts = [0]
        self.line_ends: list[int] = []
        for match in NEWLINE.finditer(doc):
            self.line_ends.append(match.start())
            self.line_starts.append(match.end())
        self.line_ends.append(len(doc))

    # -- token counts ------------------------------------------------------------------

    def cost(self, text: str) -> int:
        """Model tokens of `text`, but never fewer than its share of the character budget."""
        self.deadline.check()
        return self._cost(text, self.count(text))

    def cost_of_count(self, text: str, count: int) -> int:
        """`cost(text)` for a text whose `count` (special tokens included) is already known.

        Saves tokenizing the text a second time (the chunker counts every chunk's embedded
        text, then needs its cost too).
        """
        self.deadline.check()
        return self._cost(text, count)

    def _cost(self, text: str, count: int) -> int:
        settings = self.settings
        floor = -(-len(text) * settings.max_tokens // settings.max_chunk_chars)
        return max(count - self.specials, floor, 0)

    def span_tokens(self, start: int, end: int) -> int:
        """The cost of `doc[start:end]`, cached."""
        key = (start, end)
        cached = self._span_cache.get(key)
        if cached is None:
            cached = self.cost(self.doc[start:end])
            self._span_cache[key] = cached
        return cached

    def text_tokens(self, text: str) -> int:
        """The cost of a synthetic text (a header, a repeated fence line), cached."""
        if not text:
            return 0
        cached = self._text_cache.get(text)
        if cached is None:
            cached = self.cost(text)
            self._text_cache[text] = cached
        return cached

    def gap_tokens(self, end: int, start: int) -> int:
        """The cost of the text between two pieces."""
        # Between blocks there is only whitespace, which costs nothing in a WordPiece model;
        # inside a quote the gap may hold bare ">" markers, which do.
        gap = self.doc[end:start]
        return self.text_tokens(gap) if gap.strip() else 0

    def group_tokens(self, group: Sequence[Piece]) -> int:
        """The cost of a run of pieces with the gaps between them."""
        total = group[0].tokens
        for a, b in pairwise(group):
            total += self.gap_tokens(a.end, b.start) + b.tokens
        return total

    def group_text(self, group: Sequence[Piece]) -> str:
        """The text of a run of pieces, with the synthetic text around it."""
        first, last = group[0], group[-1]
        return first.prefix + self.doc[first.start : last.end] + last.suffix

    # -- lines -------------------------------------------------------------------------

    def trim_end(self, start: int, end: int) -> int:
        """Move `end` back over trailing whitespace, not before `start`."""
        doc = self.doc
        while end > start and doc[end - 1].isspace():
            end -= 1
        return end

    def map_span(self, line_map: Sequence[int]) -> tuple[int, int]:
        """The offsets of a token map's lines, trailing whitespace left out."""
        first = line_map[0]
        last = min(line_map[1], len(self.line_starts)) - 1
        start = self.line_starts[first]
        return start, self.trim_end(start, self.line_ends[last])

    def line_of(self, offset: int) -> int:
        """The line holding `offset`."""
        return bisect_right(self.line_starts, offset) - 1

    def line_text(self, line: int) -> str:
        """The text of one line, without its line end."""
        return self.doc[self.line_starts[line] : self.line_ends[line]]

    def sentences(self, start: int, end: int) -> list[tuple[int, int]]:
        """The sentences of `doc[start:end]` as offsets, the spaces between left out."""
        text = self.doc[start:end]
        spans: list[tuple[int, int]] = []
        begin = 0
        for match in _SENTENCE_END.finditer(text):
            after = match.end()
            # "e.g. the" is not a sentence end; "done. The" is.
            if after < len(text) and not text[after].islower():
                spans.append((start + begin, start + match.start(1)))
                begin = after
        if begin < len(text):
            spans.append((start + begin, start + len(text)))
        return spans
