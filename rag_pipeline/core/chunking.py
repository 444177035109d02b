"""Semantic chunking of Markdown into parent sections and embeddable chunks (seed 001).

A document is cut into *sections* at the configured heading levels (the parents, stored once)
and each section into *chunks*: runs of whole top-level blocks (paragraph, list, code fence,
table, quote, HTML block, heading line) packed toward a target size in the embedding model's
own tokens. Only a block that alone exceeds the budget is split, at the most meaningful
boundary it has: list items, code lines (the fence re-opened and closed in every piece),
table rows (the header repeated), sentences, words, and as a last resort model tokens.

Everything is cut from the original text by the parser's line maps, never re-rendered, so a
chunk reads exactly like its source and its offsets point back into the document.

Limits: a table header too long to repeat in every piece (over half the budget) is repeated
as an empty header of the same width, and one too long for a chunk at all is cut like text;
a table cell or code line over the budget is cut between words; a fence the source leaves
open stays open in its last piece.
"""

import hashlib
import json
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import cache
from itertools import pairwise
from typing import Protocol

from markdown_it import MarkdownIt
from markdown_it.token import Token

from rag_pipeline.core.models import Chunk, Section
from rag_pipeline.core.time_budget import BudgetExpired, time_budget

CHUNKER_VERSION = "3"
# Chunking is linear, but a megabyte of empty headings still costs a minute of parsing.
DEFAULT_TIME_BUDGET_SECONDS = 30.0

_HEADER_SEPARATOR = " › "
# Breadcrumbs arrive as "A > B > C" (seed ADR-021) or already joined with "›".
_BREADCRUMB_SPLIT = re.compile(r"\s*[›»]\s*|\s+>\s+")
# markdown-it splits lines exactly like this (after its own normalisation), so line numbers
# in token maps match these offsets even for CR or CRLF documents.
_NEWLINE = re.compile(r"\r\n|\r|\n")
_FRONT_MATTER = re.compile(
    r"\A---[ \t]*(?:\r\n|\r|\n)(.*?)^(?:---|\.\.\.)[ \t]*(?=\r\n|\r|\n|\Z)", re.S | re.M
)
_FRONT_MATTER_KEY = re.compile(r"^[A-Za-z_][\w-]*\s*:", re.M)
_SENTENCE_END = re.compile(r"[.!?…][\"'”’»)\]]*(\s+)")
_WORD = re.compile(r"\S+")
_CELL_PIPE = re.compile(r"(?<!\\)\|")

# Split levels, coarsest first: a piece that is still too big moves on to the next one.
_LEVELS = ("node", "lines", "cells", "sentences", "words", "chars")
_BLOCK_KINDS = {
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "blockquote_open": "blockquote",
    "paragraph_open": "paragraph",
    "heading_open": "heading",
    "table_open": "table",
    "fence": "fence",
    "code_block": "code_block",
    "html_block": "html_block",
    "hr": "hr",
}
_CONTAINERS = ("bullet_list_open", "ordered_list_open", "list_item_open", "blockquote_open")
# A tokenizer that is not additive over whitespace makes the block-sum estimate low; each
# retry shrinks the room by the observed overshoot, so this is never reached in practice.
_MAX_ATTEMPTS = 8


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
        min_section_tokens: Sections smaller than this merge with a neighbour.
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
        payload = json.dumps({**asdict(self), "chunker_version": CHUNKER_VERSION}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


_DEFAULT_SETTINGS = ChunkingSettings()


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


def chunk_markdown(
    markdown: str,
    *,
    title: str,
    breadcrumb: str,
    count_tokens: TokenCounter,
    settings: ChunkingSettings = _DEFAULT_SETTINGS,
    time_budget_seconds: float | None = DEFAULT_TIME_BUDGET_SECONDS,
) -> tuple[list[Section], list[Chunk]]:
    """Cut a Markdown document into parent sections and embeddable chunks.

    Args:
        markdown: The document (CommonMark + GFM tables).
        title: The document title; names the section before the first heading.
        breadcrumb: The document's location, used in every chunk's context header.
        count_tokens: The embedding model's token counter.
        settings: Section levels and token budgets.
        time_budget_seconds: Most seconds chunking may take (None: no limit).

    Returns:
        The sections in document order and the chunks in document order. A chunk's
        `start_char`/`end_char` delimit its own source text (without the overlap repeated
        from the previous chunk); `token_count` is `count_tokens(embedded_text)`, never over
        `settings.max_tokens`.

    Raises:
        ValueError: If `max_tokens` leaves no room for even a single character.
        ChunkLimitError: The document needs more than `settings.max_chunks` chunks, or more
            than `time_budget_seconds` to chunk.
    """
    if not markdown.strip():
        return [], []
    try:
        with time_budget(time_budget_seconds):
            return _Chunker(markdown, title, breadcrumb, count_tokens, settings).run()
    except BudgetExpired:
        raise ChunkLimitError(
            f"document took more than {time_budget_seconds:g} s to chunk (RAG_MAX_CONVERT_SECONDS)"
        ) from None


@cache
def _block_parser() -> MarkdownIt:
    # Inline parsing is a third of the parse time and only heading titles need it.
    return MarkdownIt("commonmark").enable("table").disable("inline")


@cache
def _inline_parser() -> MarkdownIt:
    return MarkdownIt("commonmark")


@dataclass(frozen=True, slots=True)
class _Piece:
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


@dataclass(frozen=True)
class _SectionDraft:
    level: int
    title: str
    path: tuple[str, ...]
    blocks: tuple[_Piece, ...]
    tokens: int


class _Chunker:
    """One document's chunking run: the parse, the token-count caches and the packer."""

    def __init__(
        self,
        doc: str,
        title: str,
        breadcrumb: str,
        count_tokens: TokenCounter,
        settings: ChunkingSettings,
    ) -> None:
        self._doc = doc
        self._title = title
        self._breadcrumb = breadcrumb
        self._count = count_tokens
        self._settings = settings
        self._specials = count_tokens("")
        self._span_cache: dict[tuple[int, int], int] = {}
        self._text_cache: dict[str, int] = {}
        self._sentence_cache: dict[int, list[tuple[int, int]]] = {}
        self._header_cache: dict[tuple[tuple[str, ...], str], str] = {}
        self._line_starts = [0]
        self._line_ends: list[int] = []
        for match in _NEWLINE.finditer(doc):
            self._line_ends.append(match.start())
            self._line_starts.append(match.end())
        self._line_ends.append(len(doc))
        self._tokens: list[Token] = []
        self._blocks: list[_Piece] = []
        self._headings: dict[int, tuple[int, str]] = {}

    # -- token counts ------------------------------------------------------------------

    def _cost(self, text: str) -> int:
        """Model tokens of `text`, but never fewer than its share of the character budget."""
        settings = self._settings
        floor = -(-len(text) * settings.max_tokens // settings.max_chunk_chars)
        return max(self._count(text) - self._specials, floor, 0)

    def _span_tokens(self, start: int, end: int) -> int:
        key = (start, end)
        cached = self._span_cache.get(key)
        if cached is None:
            cached = self._cost(self._doc[start:end])
            self._span_cache[key] = cached
        return cached

    def _text_tokens(self, text: str) -> int:
        if not text:
            return 0
        cached = self._text_cache.get(text)
        if cached is None:
            cached = self._cost(text)
            self._text_cache[text] = cached
        return cached

    def _gap_tokens(self, end: int, start: int) -> int:
        # Between blocks there is only whitespace, which costs nothing in a WordPiece model;
        # inside a quote the gap may hold bare ">" markers, which do.
        gap = self._doc[end:start]
        return self._text_tokens(gap) if gap.strip() else 0

    # -- lines -------------------------------------------------------------------------

    def _trim_end(self, start: int, end: int) -> int:
        doc = self._doc
        while end > start and doc[end - 1].isspace():
            end -= 1
        return end

    def _map_span(self, line_map: list[int]) -> tuple[int, int]:
        first = line_map[0]
        last = min(line_map[1], len(self._line_starts)) - 1
        start = self._line_starts[first]
        return start, self._trim_end(start, self._line_ends[last])

    def _line_of(self, offset: int) -> int:
        return bisect_right(self._line_starts, offset) - 1

    def _line_text(self, line: int) -> str:
        return self._doc[self._line_starts[line] : self._line_ends[line]]

    # -- parse -------------------------------------------------------------------------

    def _parse(self) -> None:
        doc = self._doc
        parse_text = doc
        prev_end = 0
        front = _FRONT_MATTER.match(doc)
        if front and _FRONT_MATTER_KEY.search(front.group(1)):
            # YAML front matter would parse as a rule plus a setext heading; it is kept as one
            # opaque block, and blanked for the parser so that line numbers stay the same.
            end = front.end()
            newlines = len(_NEWLINE.findall(doc, 0, end))
            parse_text = "\n" * newlines + doc[end:]
            self._add_block(0, end, "front_matter", "lines", None)
            prev_end = end
        tokens = _block_parser().parse(parse_text)
        self._tokens = tokens
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if tok.level != 0 or tok.nesting < 0 or tok.map is None:
                i += 1
                continue
            close = self._close_of(i)
            start, end = self._map_span(tok.map)
            start = max(start, prev_end)
            self._add_gap(prev_end, start)
            if end > start:
                index = self._add_block(
                    start, end, _BLOCK_KINDS.get(tok.type, "text"), "node", (i, close)
                )
                if tok.type == "heading_open":
                    level = int(tok.tag[1:])
                    self._headings[index] = (level, _plain_inline(tokens[i + 1].content))
                prev_end = end
            i = close + 1
        self._add_gap(prev_end, len(doc))

    def _close_of(self, index: int) -> int:
        tokens = self._tokens
        tok = tokens[index]
        if tok.nesting == 0:
            return index
        j = index + 1
        while not (tokens[j].level == tok.level and tokens[j].nesting == -1):
            j += 1
        return j

    def _add_block(
        self, start: int, end: int, kind: str, split_as: str, node: tuple[int, int] | None
    ) -> int:
        end = self._trim_end(start, end)
        index = len(self._blocks)
        tokens = self._span_tokens(start, end)
        heading = kind == "heading"
        self._blocks.append(_Piece(start, end, tokens, index, kind, split_as, node, heading))
        return index

    def _add_gap(self, start: int, end: int) -> None:
        # Text no block token covers (link reference definitions, say) is still content.
        gap = self._doc[start:end]
        if gap.strip():
            lead = len(gap) - len(gap.lstrip())
            self._add_block(start + lead, end, "text", "lines", None)

    # -- sections ----------------------------------------------------------------------

    def _sections(self) -> list[_SectionDraft]:
        levels = self._settings.section_levels
        drafts: list[_SectionDraft] = []
        stack: list[tuple[int, str]] = []
        level, title, path = 0, self._title, ()
        current: list[_Piece] = []
        for block in self._blocks:
            heading = self._headings.get(block.block)
            if heading is not None and heading[0] in levels:
                if current:
                    drafts.append(self._draft(level, title, path, current))
                level, title = heading
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append(heading)
                path = tuple(text for _, text in stack)
                current = []
            current.append(block)
        if current:
            drafts.append(self._draft(level, title, path, current))
        return self._merge_tiny(drafts)

    def _draft(
        self, level: int, title: str, path: tuple[str, ...], blocks: list[_Piece]
    ) -> _SectionDraft:
        return _SectionDraft(level, title, path, tuple(blocks), sum(b.tokens for b in blocks))

    def _merge_tiny(self, drafts: list[_SectionDraft]) -> list[_SectionDraft]:
        """Fold sections too small to be useful parents into a neighbour.

        Preferred: the previous sibling (same level, same enclosing headings); then the next
        sibling; then, for a parent with next to no text of its own (an H1 holding only its
        title), its first child, whose heading path already names it.
        """

        def tiny(draft: _SectionDraft) -> bool:
            return draft.tokens + self._specials < self._settings.min_section_tokens

        def siblings(a: _SectionDraft, b: _SectionDraft) -> bool:
            return a.level == b.level and a.path[:-1] == b.path[:-1]

        def child(parent: _SectionDraft, other: _SectionDraft) -> bool:
            depth = len(parent.path)
            return other.level > parent.level and other.path[:depth] == parent.path

        # Merged runs are collected as lists and frozen once at the end: absorbing one draft
        # at a time into a growing tuple made 500,000 empty headings take minutes.
        backward: list[tuple[_SectionDraft, list[_SectionDraft]]] = []
        for draft in drafts:
            if backward and tiny(draft) and siblings(backward[-1][0], draft):
                head, run = backward[-1]
                run.append(draft)
                backward[-1] = (replace(head, tokens=head.tokens + draft.tokens), run)
            else:
                backward.append((draft, [draft]))
        # Right to left, so that a run of tiny sections collects into the first big one.
        merged: list[tuple[_SectionDraft, list[list[_SectionDraft]]]] = []
        for here, run in reversed(backward):
            if merged:
                after, runs = merged[-1]
                if tiny(here) and (siblings(here, after) or child(here, after)):
                    runs.append(run)
                    merged[-1] = (replace(after, tokens=after.tokens + here.tokens), runs)
                    continue
            merged.append((here, [run]))
        out: list[_SectionDraft] = []
        for head, runs in reversed(merged):
            blocks = tuple(b for run in reversed(runs) for d in run for b in d.blocks)
            out.append(replace(head, blocks=blocks))
        return out

    # -- run ---------------------------------------------------------------------------

    def run(self) -> tuple[list[Section], list[Chunk]]:
        self._parse()
        sections: list[Section] = []
        chunks: list[Chunk] = []
        for draft in self._sections():
            start, end = draft.blocks[0].start, draft.blocks[-1].end
            ordinal = len(sections)
            sections.append(
                Section(ordinal, draft.title, draft.path, self._doc[start:end], start, end)
            )
            for text, embedded, count, c_start, c_end in self._section_chunks(draft):
                chunks.append(Chunk(len(chunks), ordinal, text, embedded, count, c_start, c_end))
            limit = self._settings.max_chunks
            if len(chunks) > limit:
                # Stop at once: the rest of a runaway document is not worth chunking.
                raise ChunkLimitError(
                    f"document needs more than {limit:,} chunks (RAG_MAX_CHUNKS_PER_DOCUMENT)"
                )
        return sections, chunks

    def _header(self, path: tuple[str, ...], omit: str = "") -> str:
        cached = self._header_cache.get((path, omit))
        if cached is not None:
            return cached
        # A header eating a quarter of the budget is not "short" any more: drop the parts
        # that matter least for retrieval until it fits.
        limit = self._settings.max_tokens // 4
        title, crumb = self._title, self._breadcrumb
        header = ""
        for parts in ((title, crumb, path), (title, "", path), ("", "", path), ("", "", path[-1:])):
            candidate = context_header(*parts, omit=omit)
            if self._text_tokens(candidate) <= limit:
                header = candidate
                break
        self._header_cache[(path, omit)] = header
        return header

    def _section_chunks(self, draft: _SectionDraft) -> list[tuple[str, str, int, int, int]]:
        settings = self._settings
        header = self._header(draft.path)
        # The section's first chunk opens with the section's own heading line.
        opens_with_heading = bool(draft.blocks) and draft.blocks[0].heading
        first_header = self._header(draft.path, omit=draft.title) if opens_with_heading else header
        header_tokens = self._text_tokens(header)
        full_room = settings.max_tokens - self._specials - header_tokens
        shrink = 0
        for _ in range(_MAX_ATTEMPTS):
            room = full_room - shrink
            if room < 1:
                break
            target = max(1, min(room, settings.target_tokens - self._specials - header_tokens))
            groups = [g for g in self._pack(list(draft.blocks), room, room, target) if g]
            out: list[tuple[str, str, int, int, int]] = []
            worst = 0
            for index, group in enumerate(groups):
                body = self._group_text(group)
                texts = [body]
                if index > 0:
                    overlapped = self._with_overlap(groups[index - 1][-1], group, body, room)
                    if overlapped is not None:
                        texts.insert(0, overlapped)
                over = 0
                for text in texts:
                    # Only shorter than `header`, so the room computed above still holds.
                    embedded = (first_header if index == 0 else header) + text
                    count = self._count(embedded)
                    over = max(count, self._cost(embedded) + self._specials) - settings.max_tokens
                    if over <= 0:
                        out.append((text, embedded, count, group[0].start, group[-1].end))
                        break
                else:
                    worst = max(worst, over)
            if worst == 0:
                return out
            shrink += worst
        raise ValueError(
            f"max_tokens={settings.max_tokens} leaves no room for the text of section "
            f"{draft.title!r} after its context header"
        )

    def _group_text(self, group: list[_Piece]) -> str:
        first, last = group[0], group[-1]
        return first.prefix + self._doc[first.start : last.end] + last.suffix

    def _with_overlap(self, prev: _Piece, group: list[_Piece], body: str, room: int) -> str | None:
        """Return the chunk text with the previous chunk's last sentences in front, if they fit.

        Sentences are taken only from prose (a paragraph), never from code, tables or lists,
        and not in front of a heading, which starts a new topic anyway.
        """
        wanted = self._settings.overlap_sentences
        first = group[0]
        if wanted == 0 or prev.kind != "paragraph" or prev.suffix or first.heading:
            return None
        block = self._blocks[prev.block]
        inside = [s for s in self._sentences_of_block(block) if s[0] >= prev.start]
        inside = [s for s in inside if s[1] <= prev.end]
        # Only whole sentences: a piece cut inside a sentence has no clean tail to repeat.
        if not inside or inside[-1][1] != prev.end:
            return None
        start = inside[-wanted:][0][0]
        overlap_tokens = self._span_tokens(start, prev.end)
        if self._group_tokens(group) + overlap_tokens > room:
            return None
        doc = self._doc
        between = doc[prev.end : first.start]
        if first.block == prev.block and not first.prefix and between.isspace():
            # The same paragraph goes on: keep the source's own spacing.
            return doc[start : first.start] + body
        return doc[start : prev.end] + "\n\n" + body

    def _group_tokens(self, group: list[_Piece]) -> int:
        total = group[0].tokens
        for a, b in pairwise(group):
            total += self._gap_tokens(a.end, b.start) + b.tokens
        return total

    def _sentences_of_block(self, block: _Piece) -> list[tuple[int, int]]:
        cached = self._sentence_cache.get(block.block)
        if cached is None:
            cached = self._sentences(block.start, block.end)
            self._sentence_cache[block.block] = cached
        return cached

    # -- packing -----------------------------------------------------------------------

    def _pack(
        self, items: list[_Piece], first_room: int, room: int, target: int
    ) -> list[list[_Piece]]:
        """Pack pieces greedily into groups of at most `room` tokens, aiming at `target`.

        The first group gets only `first_room` (what is left of the caller's current chunk);
        if nothing fits there, the first group is empty. A piece too big for a group of its
        own is split, and its first part fills the current group when that is worth it.
        A heading is carried to the next group rather than ending one, and starts a new
        group when the current one is at least half full.
        """
        groups: list[list[_Piece]] = []
        cur: list[_Piece] = []
        totals: list[int] = []  # running token total of `cur`, one per piece
        cur_room = first_room
        fill_min = max(1, target // 4)

        def close() -> None:
            nonlocal cur, totals, cur_room
            if cur or not groups:
                groups.append(cur)
            cur, totals, cur_room = [], [], room

        def append(piece: _Piece) -> None:
            gap = self._gap_tokens(cur[-1].end, piece.start) if cur else 0
            totals.append((totals[-1] if totals else 0) + gap + piece.tokens)
            cur.append(piece)

        def joined(piece: _Piece) -> int | None:
            if not cur or cur[-1].suffix or piece.prefix:
                return None
            return totals[-1] + self._gap_tokens(cur[-1].end, piece.start) + piece.tokens

        def carry_headings(piece: _Piece, limit: int) -> bool:
            # Move trailing headings into the next group when they fit there with `piece`.
            # Headings alone move too if this is the caller's part-filled first group.
            held = 0
            while held < len(cur) and cur[-1 - held].heading:
                held += 1
            if not held or (held == len(cur) and cur_room >= room):
                return False
            moved = cur[-held:]
            gap = self._gap_tokens(moved[-1].end, piece.start)
            if self._group_tokens(moved) + gap + min(piece.tokens, limit) > room:
                return False
            del cur[-held:]
            del totals[-held:]
            close()
            for heading in moved:
                append(heading)
            return True

        # Tokens from each item to the end: a small tail joins the last group instead of
        # becoming a useless group of its own (a closing rule, a one-line remark).
        rest = [0] * (len(items) + 1)
        for index in range(len(items) - 1, -1, -1):
            rest[index] = rest[index + 1] + items[index].tokens

        for index, item in enumerate(items):
            if not cur:
                if item.tokens <= cur_room:
                    append(item)
                    continue
                if item.tokens <= room:
                    close()
                    append(item)
                    continue
                self._place(self._split(item, cur_room, room, target), close, append)
                continue
            if (
                item.heading
                and item.tokens <= room
                and not cur[-1].heading
                and totals[-1] >= target // 2
            ):
                # A deeper heading starts a new group of blocks once this one is reasonably
                # full, so that chunks follow the document's own sub-topics.
                close()
                append(item)
                continue
            total = joined(item)
            if (
                total is not None
                and total <= cur_room
                and (
                    total <= target
                    or total - target < target - totals[-1]
                    or rest[index] <= fill_min
                )
            ):
                append(item)
                continue
            remaining = cur_room - totals[-1] - self._gap_tokens(cur[-1].end, item.start)
            if item.tokens <= room:
                if carry_headings(item, item.tokens):
                    append(item)
                elif (
                    all(p.heading for p in cur)
                    and not cur[-1].suffix
                    and remaining > 0
                    and item.split_as == "node"
                    and not self._headless_table(item)
                ):
                    # Fits alone but not under its heading: a group holding only the heading
                    # would be useless, so the heading takes the first part. (Not for a
                    # table row or code line, which would be mangled for little gain.)
                    self._place(self._split(item, remaining, room, target), close, append)
                else:
                    close()
                    append(item)
                continue
            # Too big for any group: split it, and let its first part top up this group.
            if remaining < fill_min:
                carry_headings(item, fill_min)
                remaining = cur_room - totals[-1] - self._gap_tokens(cur[-1].end, item.start)
            if not cur[-1].suffix and (cur[-1].heading or remaining >= fill_min):
                subs = self._split(item, remaining, room, target)
            else:
                close()
                subs = self._split(item, room, room, target)
            self._place(subs, close, append)
        if cur:
            close()
        return groups

    @staticmethod
    def _place(
        subs: list[_Piece | None], close: Callable[[], None], append: Callable[[_Piece], None]
    ) -> None:
        # The first part was sized to the current group; every later part starts a new one
        # (each was sized to a whole group), and the last stays open for what follows.
        for index, piece in enumerate(subs):
            if piece is None:
                close()
                continue
            if index > 0:
                close()
            append(piece)

    def _split(self, item: _Piece, first_room: int, room: int, target: int) -> list[_Piece | None]:
        """Split an oversized piece; a leading None means nothing fitted in `first_room`."""
        if room < 1:
            raise ValueError("max_tokens leaves no room for any text")
        if first_room < 1:
            return [None, *self._split(item, room, room, target)]
        item = self._descend(item)
        prefix, suffix, pre_tokens, suf_tokens = "", "", 0, 0
        for pre, suf in self._wrappers(item):
            # Repeating more than half the budget in every piece would leave no room.
            if self._text_tokens(pre) + self._text_tokens(suf) <= room // 2:
                prefix, suffix = pre, suf
                pre_tokens, suf_tokens = self._text_tokens(pre), self._text_tokens(suf)
                break
        inner_room = room - pre_tokens - suf_tokens
        inner_first = first_room - suf_tokens
        atoms = self._atoms(item)
        if atoms is None:
            pieces = self._split_chars(item, inner_first, inner_room)
        else:
            head_fits = not atoms[0].heading or atoms[0].tokens <= inner_first
            inner_target = max(1, target - pre_tokens - suf_tokens)
            groups = self._pack(atoms, inner_first, inner_room, inner_target) if head_fits else []
            if (not groups or not groups[0]) and first_room < room:
                # Nothing (or not the whole header) fitted: start over in a fresh group, where
                # the first piece needs no repeated header and so has more room than the rest.
                return [None, *self._split(item, room, room, target)]
            if not groups:
                groups = self._pack(atoms, inner_first, inner_room, inner_target)
            pieces = [self._merge(g) if g else None for g in groups]
        first_real = next(i for i, p in enumerate(pieces) if p is not None)
        out: list[_Piece | None] = []
        for index, piece in enumerate(pieces):
            if piece is None:
                out.append(None)
                continue
            pre = prefix if index > first_real else ""
            suf = suffix if index < len(pieces) - 1 else ""
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

    def _merge(self, group: list[_Piece]) -> _Piece:
        first, last = group[0], group[-1]
        return _Piece(
            first.start,
            last.end,
            self._group_tokens(group),
            first.block,
            first.kind,
            prefix=first.prefix,
            suffix=last.suffix,
        )

    def _descend(self, item: _Piece) -> _Piece:
        """Look through containers with a single child (one item, one quoted paragraph).

        Their only boundaries are the child's, and a fence or table inside must still be
        wrapped as one.
        """
        while item.split_as == "node" and item.node is not None:
            if self._tokens[item.node[0]].type not in _CONTAINERS:
                break
            atoms = self._node_atoms(item)
            if len(atoms) != 1:
                break
            child = atoms[0]
            item = replace(child, start=item.start, end=max(child.end, item.end))
        return item

    def _headless_table(self, item: _Piece) -> bool:
        """True for a table of a header and delimiter row only: it has no row to split at.

        Splitting it anyway cuts between its header and delimiter rows, and the second part
        becomes a repeated header over a lone delimiter row: junk in the index.
        """
        inner = self._descend(item)
        if inner.node is None or self._tokens[inner.node[0]].type != "table_open":
            return False
        return len(self._node_atoms(inner)) < 2

    def _wrappers(self, item: _Piece) -> list[tuple[str, str]]:
        """Return what every piece of a split fence or table repeats, fullest form first."""
        if item.split_as != "node" or item.node is None:
            return []
        tok = self._tokens[item.node[0]]
        if tok.map is None:
            return []
        first = tok.map[0]
        if tok.type == "fence" and tok.markup:
            line = self._line_text(first).rstrip()
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
        if tok.type == "table_open" and first + 1 < len(self._line_starts):
            start = self._line_starts[first]
            header = self._doc[start : self._trim_end(start, self._line_ends[first + 1])]
            # A header too long to repeat becomes an empty one: the rows stay a table.
            close_index = item.node[1]
            columns = sum(
                1 for t in self._tokens[item.node[0] : close_index] if t.type == "th_open"
            )
            blank = "|" + " |" * columns + "\n|" + "-|" * columns
            return [(header + "\n", ""), (blank + "\n", "")]
        return []

    # -- atoms: the boundaries a piece can be split at ----------------------------------

    def _atoms(self, item: _Piece) -> list[_Piece] | None:
        """Return the parts of `item` at the coarsest level that yields more than one."""
        for level in _LEVELS[_LEVELS.index(item.split_as) :]:
            if level == "chars":
                return None
            atoms = self._atoms_at(item, level)
            if len(atoms) >= 2:
                return atoms
        return None

    def _atom(
        self,
        item: _Piece,
        start: int,
        end: int,
        split_as: str,
        node: tuple[int, int] | None = None,
    ) -> _Piece:
        return _Piece(
            start, end, self._span_tokens(start, end), item.block, item.kind, split_as, node
        )

    def _atoms_at(self, item: _Piece, level: str) -> list[_Piece]:
        if level == "node":
            return self._node_atoms(item)
        if level == "lines":
            first, last = self._line_of(item.start), self._line_of(max(item.start, item.end - 1))
            atoms: list[_Piece] = []
            for line in range(first, last + 1):
                start = max(self._line_starts[line], item.start)
                end = self._trim_end(start, min(self._line_ends[line], item.end))
                if self._doc[start:end].strip():
                    atoms.append(self._atom(item, start, end, "words"))
            return atoms
        if level == "cells":
            return self._cell_atoms(item) if item.split_as == "cells" else []
        if level == "sentences":
            spans = self._sentences(item.start, item.end)
            return [self._atom(item, s, e, "words") for s, e in spans]
        base = item.start
        text = self._doc[item.start : item.end]
        return [
            self._atom(item, base + m.start(), base + m.end(), "chars")
            for m in _WORD.finditer(text)
        ]

    def _cell_atoms(self, item: _Piece) -> list[_Piece]:
        """Cells of a table row too long for the budget; every later part starts at a pipe.

        Each part then still reads as a (shorter) row of the table.
        """
        text = self._doc[item.start : item.end]
        cuts = [m.start() for m in _CELL_PIPE.finditer(text) if 0 < m.start() < len(text) - 1]
        bounds = [0, *cuts, len(text)]
        atoms: list[_Piece] = []
        for begin, end in pairwise(bounds):
            start = item.start + begin
            stop = self._trim_end(start, item.start + end)
            if stop > start:
                atoms.append(self._atom(item, start, stop, "words"))
        return atoms

    def _node_atoms(self, item: _Piece) -> list[_Piece]:
        if item.node is None:
            return []
        open_index, close_index = item.node
        tok = self._tokens[open_index]
        if tok.map is None:
            return []
        if tok.type in _CONTAINERS:
            atoms: list[_Piece] = []
            for child_open, child_close in self._children(open_index, close_index):
                child_map = self._tokens[child_open].map
                if child_map is None:
                    continue
                start, end = self._map_span(child_map)
                # The first child shares its line with the item or quote marker: keep it.
                start = item.start if not atoms else max(start, item.start)
                end = min(end, item.end)
                if end > start:
                    atoms.append(self._atom(item, start, end, "node", (child_open, child_close)))
            return atoms
        if tok.type == "paragraph_open":
            return self._atoms_at(item, "sentences")
        if tok.type == "fence":
            return self._line_atoms(item, tok.map, 1, self._fence_closed(tok), "words")
        if tok.type == "table_open":
            return self._line_atoms(item, tok.map, 2, False, "cells")
        return []

    def _line_atoms(
        self, item: _Piece, line_map: list[int], head: int, closed: bool, split_as: str
    ) -> list[_Piece]:
        """Lines of a fence or table.

        The opening line (fence) or header and delimiter rows (table) form one atom marked as
        a heading, so that it is never left at the end of a piece; a closing fence line rides
        with the last line of code.
        """
        head_end = self._trim_end(item.start, self._line_ends[line_map[0] + head - 1])
        atoms = [replace(self._atom(item, item.start, head_end, "words"), heading=True)]
        last = min(line_map[1], len(self._line_starts)) - (2 if closed else 1)
        for line in range(line_map[0] + head, last + 1):
            start = self._line_starts[line]
            end = self._trim_end(start, self._line_ends[line])
            if end > start and self._doc[start:end].strip():
                atoms.append(self._atom(item, start, end, split_as))
        if closed and item.end > head_end:
            # The closing line joins the last line of code (or stands alone after an
            # empty fence).
            tail = atoms[-1] if len(atoms) > 1 else None
            start = tail.start if tail is not None else self._line_starts[last + 1]
            if tail is not None:
                atoms.pop()
            atoms.append(self._atom(item, max(start, head_end), item.end, "words"))
        return atoms

    def _fence_closed(self, tok: Token) -> bool:
        if tok.map is None or not tok.markup:
            return False
        last = min(tok.map[1], len(self._line_starts)) - 1
        if last <= tok.map[0]:
            return False
        text = self._line_text(last).strip().lstrip("> \t")
        return len(text) >= len(tok.markup) and set(text) == {tok.markup[0]}

    def _children(self, open_index: int, close_index: int) -> list[tuple[int, int]]:
        tokens = self._tokens
        level = tokens[open_index].level + 1
        children: list[tuple[int, int]] = []
        j = open_index + 1
        while j < close_index:
            tok = tokens[j]
            if tok.level == level and tok.nesting >= 0 and tok.type != "inline" and tok.map:
                end = self._close_of(j)
                children.append((j, end))
                j = end + 1
            else:
                j += 1
        return children

    def _sentences(self, start: int, end: int) -> list[tuple[int, int]]:
        text = self._doc[start:end]
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

    def _split_chars(self, item: _Piece, first_room: int, room: int) -> list[_Piece | None]:
        """Last resort for a "word" longer than the budget: cut by measured model tokens."""
        text = self._doc[item.start : item.end]
        out: list[_Piece | None] = []
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
            out.append(self._atom(item, start, start + size, "chars"))
            pos += size
            limit = room
        return out

    def _longest_prefix(self, text: str, pos: int, limit: int) -> int:
        def fits(size: int) -> bool:
            return self._text_tokens(text[pos : pos + size]) <= limit

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


def _plain_inline(source: str) -> str:
    """Return the visible text of an inline Markdown snippet (a heading's title)."""
    parts: list[str] = []

    def walk(tokens: Sequence[Token]) -> None:
        for tok in tokens:
            if tok.type in ("text", "code_inline"):
                parts.append(tok.content)
            elif tok.type in ("softbreak", "hardbreak"):
                parts.append(" ")
            if tok.children:
                walk(tok.children)

    walk(_inline_parser().parseInline(source))
    return " ".join("".join(parts).split())
