"""The boundaries a piece can be split at: its atoms at each split level."""

import re
from dataclasses import replace
from itertools import pairwise

from markdown_it.token import Token

from rag_pipeline.core.chunking.blocks import CONTAINERS, ParsedBlocks
from rag_pipeline.core.chunking.text import DocumentText, Piece

# Split levels, coarsest first: a piece that is still too big moves on to the next one.
LEVELS = ("node", "lines", "cells", "sentences", "words", "chars")
_WORD = re.compile(r"\S+")
_CELL_PIPE = re.compile(r"(?<!\\)\|")


class Atoms:
    """Finds the parts of a piece at the coarsest split level that has more than one."""

    def __init__(self, text: DocumentText, parsed: ParsedBlocks) -> None:
        self._text = text
        self._parsed = parsed

    def of(self, item: Piece) -> list[Piece] | None:
        """Return the parts of `item` at the coarsest level that yields more than one."""
        for level in LEVELS[LEVELS.index(item.split_as) :]:
            if level == "chars":
                return None
            atoms = self._at(item, level)
            if len(atoms) >= 2:
                return atoms
        return None

    def atom(
        self,
        item: Piece,
        start: int,
        end: int,
        split_as: str,
        node: tuple[int, int] | None = None,
    ) -> Piece:
        """A part of `item` from `start` to `end`, to be split further `split_as`."""
        tokens = self._text.span_tokens(start, end)
        return Piece(start, end, tokens, item.block, item.kind, split_as, node)

    def _at(self, item: Piece, level: str) -> list[Piece]:
        text = self._text
        if level == "node":
            return self.node_atoms(item)
        if level == "lines":
            first, last = text.line_of(item.start), text.line_of(max(item.start, item.end - 1))
            atoms: list[Piece] = []
            for line in range(first, last + 1):
                start = max(text.line_starts[line], item.start)
                end = text.trim_end(start, min(text.line_ends[line], item.end))
                if text.doc[start:end].strip():
                    atoms.append(self.atom(item, start, end, "words"))
            return atoms
        if level == "cells":
            return self._cell_atoms(item) if item.split_as == "cells" else []
        if level == "sentences":
            spans = text.sentences(item.start, item.end)
            return [self.atom(item, s, e, "words") for s, e in spans]
        base = item.start
        words = _WORD.finditer(text.doc[item.start : item.end])
        return [self.atom(item, base + m.start(), base + m.end(), "chars") for m in words]

    def _cell_atoms(self, item: Piece) -> list[Piece]:
        """Cells of a table row too long for the budget; every later part starts at a pipe.

        Each part then still reads as a (shorter) row of the table.
        """
        text = self._text.doc[item.start : item.end]
        cuts = [m.start() for m in _CELL_PIPE.finditer(text) if 0 < m.start() < len(text) - 1]
        bounds = [0, *cuts, len(text)]
        atoms: list[Piece] = []
        for begin, end in pairwise(bounds):
            start = item.start + begin
            stop = self._text.trim_end(start, item.start + end)
            if stop > start:
                atoms.append(self.atom(item, start, stop, "words"))
        return atoms

    def node_atoms(self, item: Piece) -> list[Piece]:
        """The parts of a block: a container's children, a paragraph's sentences, lines."""
        if item.node is None:
            return []
        open_index, close_index = item.node
        tok = self._parsed.tokens[open_index]
        if tok.map is None:
            return []
        if tok.type in CONTAINERS:
            atoms: list[Piece] = []
            for child_open, child_close in self._parsed.children(open_index, close_index):
                child_map = self._parsed.tokens[child_open].map
                if child_map is None:
                    continue
                start, end = self._text.map_span(child_map)
                # The first child shares its line with the item or quote marker: keep it.
                start = item.start if not atoms else max(start, item.start)
                end = min(end, item.end)
                if end > start:
                    atoms.append(self.atom(item, start, end, "node", (child_open, child_close)))
            return atoms
        if tok.type == "paragraph_open":
            return self._at(item, "sentences")
        if tok.type == "fence":
            return self._line_atoms(item, tok.map, 1, self._fence_closed(tok), "words")
        if tok.type == "table_open":
            return self._line_atoms(item, tok.map, 2, False, "cells")
        return []

    def _line_atoms(
        self, item: Piece, line_map: list[int], head: int, closed: bool, split_as: str
    ) -> list[Piece]:
        """Lines of a fence or table.

        The opening line (fence) or header and delimiter rows (table) form one atom marked as
        a heading, so that it is never left at the end of a piece; a closing fence line rides
        with the last line of code.
        """
        text = self._text
        head_end = text.trim_end(item.start, text.line_ends[line_map[0] + head - 1])
        atoms = [replace(self.atom(item, item.start, head_end, "words"), heading=True)]
        last = min(line_map[1], len(text.line_starts)) - (2 if closed else 1)
        for line in range(line_map[0] + head, last + 1):
            start = text.line_starts[line]
            end = text.trim_end(start, text.line_ends[line])
            if end > start and text.doc[start:end].strip():
                atoms.append(self.atom(item, start, end, split_as))
        if closed and item.end > head_end:
            # The closing line joins the last line of code (or stands alone after an
            # empty fence).
            tail = atoms[-1] if len(atoms) > 1 else None
            start = tail.start if tail is not None else text.line_starts[last + 1]
            if tail is not None:
                atoms.pop()
            atoms.append(self.atom(item, max(start, head_end), item.end, "words"))
        return atoms

    def _fence_closed(self, tok: Token) -> bool:
        if tok.map is None or not tok.markup:
            return False
        last = min(tok.map[1], len(self._text.line_starts)) - 1
        if last <= tok.map[0]:
            return False
        line = self._text.line_text(last).strip().lstrip("> \t")
        return len(line) >= len(tok.markup) and set(line) == {tok.markup[0]}
