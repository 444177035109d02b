"""Splitting a block that alone exceeds the budget, at the most meaningful boundary it has.

Split levels, coarsest first: a container's children (list items, quoted blocks), lines
(code lines with the fence re-opened and closed in every piece, table rows with the header
repeated), table cells, sentences, words, and as a last resort model tokens. A piece that is
still too big moves on to the next level.

Limits: a table header too long to repeat in every piece (over half the budget) is repeated
as an empty header of the same width, and one too long for a chunk at all is cut like text;
a table cell or code line over the budget is cut between words; a fence the source leaves
open stays open in its last piece.
"""

import unicodedata
from collections.abc import Callable
from dataclasses import replace

from rag_pipeline.core.chunking.atoms import Atoms
from rag_pipeline.core.chunking.blocks import CONTAINERS, ParsedBlocks
from rag_pipeline.core.chunking.text import DocumentText, Piece

PackFunction = Callable[[list[Piece], int, int, int], list[list[Piece]]]
"""`(pieces, first_room, room, target) -> groups`: the packer, which splitting recurses into."""


class Splitter:
    """Splits oversized pieces of one document into parts that each fit a group."""

    def __init__(self, text: DocumentText, parsed: ParsedBlocks, pack: PackFunction) -> None:
        self._text = text
        self._parsed = parsed
        self._pack = pack
        self._atoms = Atoms(text, parsed)

    def split(self, item: Piece, first_room: int, room: int, target: int) -> list[Piece | None]:
        """Split an oversized piece; a leading None means nothing fitted in `first_room`."""
        if room < 1:
            raise ValueError("max_tokens leaves no room for any text")
        if first_room < 1:
            return [None, *self.split(item, room, room, target)]
        item = self.descend(item)
        prefix, suffix, pre_tokens, suf_tokens = "", "", 0, 0
        text_tokens = self._text.text_tokens
        for pre, suf in self._wrappers(item):
            # Repeating more than half the budget in every piece would leave no room.
            if text_tokens(pre) + text_tokens(suf) <= room // 2:
                prefix, suffix = pre, suf
                pre_tokens, suf_tokens = text_tokens(pre), text_tokens(suf)
                break
        inner_room = room - pre_tokens - suf_tokens
        inner_first = first_room - suf_tokens
        atoms = self._atoms.of(item)
        if atoms is None:
            pieces = self._split_chars(item, inner_first, inner_room)
        else:
            head_fits = not atoms[0].heading or atoms[0].tokens <= inner_first
            inner_target = max(1, target - pre_tokens - suf_tokens)
            groups = self._pack(atoms, inner_first, inner_room, inner_target) if head_fits else []
            if (not groups or not groups[0]) and first_room < room:
                # Nothing (or not the whole header) fitted: start over in a fresh group, where
                # the first piece needs no repeated header and so has more room than the rest.
                return [None, *self.split(item, room, room, target)]
            if not groups:
                groups = self._pack(atoms, inner_first, inner_room, inner_target)
            pieces = [self._merge(g) if g else None for g in groups]
        return _wrapped(pieces, item, (prefix, pre_tokens), (suffix, suf_tokens))

    def _merge(self, group: list[Piece]) -> Piece:
        first, last = group[0], group[-1]
        return Piece(
            first.start,
            last.end,
            self._text.group_tokens(group),
            first.block,
            first.kind,
            prefix=first.prefix,
            suffix=last.suffix,
        )

    def descend(self, item: Piece) -> Piece:
        """Look through containers with a single child (one item, one quoted paragraph).

        Their only boundaries are the child's, and a fence or table inside must still be
        wrapped as one.
        """
        while item.split_as == "node" and item.node is not None:
            if self._parsed.tokens[item.node[0]].type not in CONTAINERS:
                break
            atoms = self._atoms.node_atoms(item)
            if len(atoms) != 1:
                break
            child = atoms[0]
            item = replace(child, start=item.start, end=max(child.end, item.end))
        return item

    def headless_table(self, item: Piece) -> bool:
        """True for a table of a header and delimiter row only: it has no row to split at.

        Splitting it anyway cuts between its header and delimiter rows, and the second part
        becomes a repeated header over a lone delimiter row: junk in the index.
        """
        inner = self.descend(item)
        if inner.node is None or self._parsed.tokens[inner.node[0]].type != "table_open":
            return False
        return len(self._atoms.node_atoms(inner)) < 2

    def _wrappers(self, item: Piece) -> list[tuple[str, str]]:
        """Return what every piece of a split fence or table repeats, fullest form first."""
        if item.split_as != "node" or item.node is None:
            return []
        text, tokens = self._text, self._parsed.tokens
        tok = tokens[item.node[0]]
        if tok.map is None:
            return []
        first = tok.map[0]
        if tok.type == "fence" and tok.markup:
            line = text.line_text(first).rstrip()
            lead = line[: max(0, line.find(tok.markup))]
            # Keep quote markers, but a list marker ("1. ") must not open a new item.
            indent = "".join(c if c in "> \t" else " " for c in lead)
            close = "\n" + indent + tok.markup
            language = tok.info.split(maxsplit=1)[:1]
            return [
                (line + "\n", close),
                (lead + tok.markup + "".join(language) + "\n", close),
                (lead + tok.markup + "\n", close),
            ]
        if tok.type == "table_open" and first + 1 < len(text.line_starts):
            start = text.line_starts[first]
            header = text.doc[start : text.trim_end(start, text.line_ends[first + 1])]
            # A header too long to repeat becomes an empty one: the rows stay a table.
            close_index = item.node[1]
            columns = sum(1 for t in tokens[item.node[0] : close_index] if t.type == "th_open")
            blank = "|" + " |" * columns + "\n|" + "-|" * columns
            return [(header + "\n", ""), (blank + "\n", "")]
        return []

    def _split_chars(self, item: Piece, first_room: int, room: int) -> list[Piece | None]:
        """Last resort for a "word" longer than the budget: cut by measured model tokens."""
        text = self._text.doc[item.start : item.end]
        out: list[Piece | None] = []
        pos = 0
        limit = first_room
        while pos < len(text):
            size = self._longest_prefix(text, pos, limit)
            if size == 0:
                if limit < room:
                    out.append(None)
                    limit = room
                    continue
                raise ValueError(f"max_tokens leaves no room for {text[pos]!r}")
            start = item.start + pos
            out.append(self._atoms.atom(item, start, start + size, "chars"))
            pos += size
            limit = room
        return out

    def _longest_prefix(self, text: str, pos: int, limit: int) -> int:
        def fits(size: int) -> bool:
            return self._text.text_tokens(text[pos : pos + size]) <= limit

        available = len(text) - pos
        good, bad = 0, available + 1
        probe = min(available, max(1, limit * 2))
        # Gallop up from a guess, then bisect: every probe encodes only about one piece.
        while probe <= available and fits(probe):
            good = probe
            if probe == available:
                return good
            probe = min(available, probe * 2)
        bad = min(bad, probe)
        while bad - good > 1:
            mid = (good + bad) // 2
            if fits(mid):
                good = mid
            else:
                bad = mid
        # Do not strand a combining mark at the start of the next piece.
        size = good
        while 1 < size < available and unicodedata.combining(text[pos + size]):
            size -= 1
        return size if size == good or fits(size) else good


def _wrapped(
    pieces: list[Piece | None], item: Piece, prefix: tuple[str, int], suffix: tuple[str, int]
) -> list[Piece | None]:
    """The parts of `item` with the repeated fence or header around every later part."""
    (pre_text, pre_tokens), (suf_text, suf_tokens) = prefix, suffix
    first_real = next(i for i, p in enumerate(pieces) if p is not None)
    out: list[Piece | None] = []
    for index, piece in enumerate(pieces):
        if piece is None:
            out.append(None)
            continue
        pre = pre_text if index > first_real else ""
        suf = suf_text if index < len(pieces) - 1 else ""
        tokens = piece.tokens + (pre_tokens if pre else 0) + (suf_tokens if suf else 0)
        out.append(
            replace(
                piece,
                tokens=tokens,
                prefix=pre + piece.prefix,
                suffix=piece.suffix + suf,
                block=item.block,
                kind=item.kind,
                heading=False,
            )
        )
    return out
