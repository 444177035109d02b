"""Packing pieces greedily into groups (the chunks' bodies) toward a target size.

A group holds at most `room` tokens and aims at `target`. A piece too big for a group of its
own is split (`split.Splitter`), and its first part fills the current group when that is
worth it. A heading is carried to the next group rather than ending one, and starts a new
group when the current one is at least half full.
"""

from collections.abc import Sequence

from rag_pipeline.core.chunking.split import Splitter
from rag_pipeline.core.chunking.text import DocumentText, Piece


def pack(
    items: Sequence[Piece],
    first_room: int,
    room: int,
    target: int,
    *,
    text: DocumentText,
    splitter: Splitter,
) -> list[list[Piece]]:
    """Pack pieces greedily into groups of at most `room` tokens, aiming at `target`.

    The first group gets only `first_room` (what is left of the caller's current chunk);
    if nothing fits there, the first group is empty.
    """
    packing = _Packing(text, splitter, first_room, room, target)
    # Tokens from each item to the end: a small tail joins the last group instead of
    # becoming a useless group of its own (a closing rule, a one-line remark).
    rest = [0] * (len(items) + 1)
    for index in range(len(items) - 1, -1, -1):
        rest[index] = rest[index + 1] + items[index].tokens
    for index, item in enumerate(items):
        packing.add(item, rest[index])
    return packing.finish()


class _Packing:
    """One `pack` call: the finished groups and the group being filled."""

    def __init__(
        self, text: DocumentText, splitter: Splitter, first_room: int, room: int, target: int
    ) -> None:
        self._text = text
        self._splitter = splitter
        self.room = room
        self.target = target
        self.fill_min = max(1, target // 4)
        self.groups: list[list[Piece]] = []
        self.cur: list[Piece] = []
        self.totals: list[int] = []  # running token total of `cur`, one per piece
        self.cur_room = first_room

    # -- the group being filled ----------------------------------------------------------

    def close(self) -> None:
        """End the current group and start an empty one with a whole group's room."""
        if self.cur or not self.groups:
            self.groups.append(self.cur)
        self.cur, self.totals, self.cur_room = [], [], self.room

    def append(self, piece: Piece) -> None:
        """Add a piece to the current group."""
        cur, totals = self.cur, self.totals
        gap = self._text.gap_tokens(cur[-1].end, piece.start) if cur else 0
        totals.append((totals[-1] if totals else 0) + gap + piece.tokens)
        cur.append(piece)

    def finish(self) -> list[list[Piece]]:
        """Close the last group and return them all."""
        if self.cur:
            self.close()
        return self.groups

    def _joined(self, piece: Piece) -> int | None:
        """The current group's tokens with `piece` added, None if they cannot join."""
        cur = self.cur
        if not cur or cur[-1].suffix or piece.prefix:
            return None
        return self.totals[-1] + self._text.gap_tokens(cur[-1].end, piece.start) + piece.tokens

    def _remaining(self, piece: Piece) -> int:
        gap = self._text.gap_tokens(self.cur[-1].end, piece.start)
        return self.cur_room - self.totals[-1] - gap

    def _carry_headings(self, piece: Piece, limit: int) -> bool:
        """Move trailing headings into the next group when they fit there with `piece`.

        Headings alone move too if this is the caller's part-filled first group.
        """
        cur = self.cur
        held = 0
        while held < len(cur) and cur[-1 - held].heading:
            held += 1
        if not held or (held == len(cur) and self.cur_room >= self.room):
            return False
        moved = cur[-held:]
        gap = self._text.gap_tokens(moved[-1].end, piece.start)
        if self._text.group_tokens(moved) + gap + min(piece.tokens, limit) > self.room:
            return False
        del cur[-held:]
        del self.totals[-held:]
        self.close()
        for heading in moved:
            self.append(heading)
        return True

    def _place(self, subs: list[Piece | None]) -> None:
        # The first part was sized to the current group; every later part starts a new one
        # (each was sized to a whole group), and the last stays open for what follows.
        for index, piece in enumerate(subs):
            if piece is None:
                self.close()
                continue
            if index > 0:
                self.close()
            self.append(piece)

    # -- one item ----------------------------------------------------------------------

    def add(self, item: Piece, rest: int) -> None:
        """Place one item; `rest` is its tokens plus those of every item after it."""
        if not self.cur:
            self._start_with(item)
        elif self._opens_subtopic(item):
            # A deeper heading starts a new group of blocks once this one is reasonably
            # full, so that chunks follow the document's own sub-topics.
            self.close()
            self.append(item)
        elif self._worth_joining(item, rest):
            self.append(item)
        elif item.tokens <= self.room:
            self._add_whole(item)
        else:
            self._add_split(item)

    def _start_with(self, item: Piece) -> None:
        if item.tokens <= self.cur_room:
            self.append(item)
        elif item.tokens <= self.room:
            self.close()
            self.append(item)
        else:
            self._place(self._splitter.split(item, self.cur_room, self.room, self.target))

    def _opens_subtopic(self, item: Piece) -> bool:
        return (
            item.heading
            and item.tokens <= self.room
            and not self.cur[-1].heading
            and self.totals[-1] >= self.target // 2
        )

    def _worth_joining(self, item: Piece, rest: int) -> bool:
        total = self._joined(item)
        target = self.target
        return (
            total is not None
            and total <= self.cur_room
            and (
                total <= target
                or total - target < target - self.totals[-1]
                or rest <= self.fill_min
            )
        )

    def _add_whole(self, item: Piece) -> None:
        """An item that fits a group of its own but not the current one."""
        remaining = self._remaining(item)
        if self._carry_headings(item, item.tokens):
            self.append(item)
        elif (
            all(p.heading for p in self.cur)
            and not self.cur[-1].suffix
            and remaining > 0
            and item.split_as == "node"
            and not self._splitter.headless_table(item)
        ):
            # Fits alone but not under its heading: a group holding only the heading
            # would be useless, so the heading takes the first part. (Not for a
            # table row or code line, which would be mangled for little gain.)
            self._place(self._splitter.split(item, remaining, self.room, self.target))
        else:
            self.close()
            self.append(item)

    def _add_split(self, item: Piece) -> None:
        """Too big for any group: split it, and let its first part top up this group."""
        remaining = self._remaining(item)
        if remaining < self.fill_min:
            self._carry_headings(item, self.fill_min)
            remaining = self._remaining(item)
        if not self.cur[-1].suffix and (self.cur[-1].heading or remaining >= self.fill_min):
            subs = self._splitter.split(item, remaining, self.room, self.target)
        else:
            self.close()
            subs = self._splitter.split(item, self.room, self.room, self.target)
        self._place(subs)
