"""Where the Markdown structure is: block token lines, and inline events mapped to lines.

markdown-it gives block tokens line maps but inline tokens no source positions. Inline
content is parsed with a tracing rule put in front of markdown-it's inline rules through
its plugin API (`md.inline.ruler.before`): the rule matches nothing, it only notes where
each rule attempt starts. The tokens pushed between two attempts belong to the rule that
matched at the first, which gives each code span, line break, link and image its offsets.
Link destinations are then re-traced with markdown-it's public link helpers (`md.helpers`).
"""

from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token

_TRACE_KEY: Final = "rag_pipeline.sanitize.trace"


@dataclass(frozen=True)
class Target:
    """A link/image destination or URL autolink body, as offsets into inline content."""

    start: int
    end: int
    link_start: int
    autolink: bool
    after_newline: bool


@dataclass
class Events:
    """What one inline token's content holds, as offsets into that content.

    Attributes:
        code_spans: `(start, end)` of each code span, backticks included.
        newlines: `(offset, hard, in_link)` of each line end read as a soft or hard break
            (not those inside code spans, raw HTML or link destinations and titles).
        targets: Link and image destinations and URL autolinks.
    """

    code_spans: list[tuple[int, int]] = field(default_factory=lambda: [])
    newlines: list[tuple[int, bool, bool]] = field(default_factory=lambda: [])
    targets: list[Target] = field(default_factory=lambda: [])


class _Attempt(NamedTuple):
    pos: int
    link_level: int
    # The end of the range being tokenized: smaller than the content inside a link label.
    pos_max: int
    first_token: int


@dataclass
class _Trace:
    state: StateInline
    attempts: list[_Attempt] = field(default_factory=lambda: [])


def _trace(state: StateInline, silent: bool) -> bool:
    trace = state.env.get(_TRACE_KEY)
    # Only the traced state: an image's alt text is parsed in a state of its own.
    if not silent and isinstance(trace, _Trace) and trace.state is state:
        trace.attempts.append(_Attempt(state.pos, state.linkLevel, state.posMax, len(state.tokens)))
    return False


def _build_parser() -> MarkdownIt:
    md = MarkdownIt("commonmark").enable("table")
    # Inline content is parsed only for the few tokens a rule needs (`Document.parse`).
    md.core.ruler.disable("inline")
    md.inline.ruler.before("text", "rag_pipeline_trace", _trace)
    return md


MD: Final = _build_parser()


@dataclass
class Inline:
    """An inline token with its document lines and the column of each content line."""

    token: Token
    first_line: int
    lines: list[str]
    columns: list[int | None]
    # False when markdown-it trimmed whole (Unicode-whitespace) lines off the content, so
    # content line k is not document line first_line + k; callers then keep the lines.
    aligned: bool = True
    starts: list[int] = field(default_factory=lambda: [])

    def __post_init__(self) -> None:
        offset = 0
        for line in self.lines:
            self.starts.append(offset)
            offset += len(line) + 1

    def position(self, offset: int) -> tuple[int, int]:
        """Content offset -> (content line, column within that content line)."""
        line = bisect_right(self.starts, offset) - 1
        return line, offset - self.starts[line]


class Document:
    """Text split into lines, its block tokens, and helpers to map inline offsets back."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.final_newline = text.endswith("\n")
        self.lines = (text[:-1] if self.final_newline else text).split("\n")
        self.env: dict[str, object] = {}
        self.tokens = MD.parse(text, self.env)

    def block_lines(self, kinds: frozenset[str]) -> bytearray:
        """Flags (1 per line) every line that lies in a block token of `kinds`."""
        flags = bytearray(len(self.lines))
        for token in self.tokens:
            if token.type in kinds and token.map:
                start, end = token.map
                flags[start:end] = b"\x01" * (min(end, len(flags)) - start)
        return flags

    def inlines(self, wanted: Callable[[Token], bool]) -> Iterator[Inline]:
        """Yields the inline tokens for which `wanted` is true, aligned to document lines."""
        row: list[Token] | None = None
        parent: Token | None = None
        for token in self.tokens:
            if token.type == "tr_open":
                row = []
            elif token.type == "tr_close":
                if row and any(wanted(cell) for cell in row):
                    yield from self._row(row, wanted)
                row = None
            elif token.type == "inline" and token.map:
                if row is not None:
                    row.append(token)
                elif wanted(token):
                    yield self._aligned(token, token.map, parent)
            parent = token

    def _aligned(self, token: Token, span: list[int], parent: Token | None) -> Inline:
        first, end = span[0], min(span[1], len(self.lines))
        content_lines = token.content.split("\n")
        # An inline token's map covers exactly its content lines (a setext underline is
        # outside it); anything else is a layout this module does not rely on.
        if parent is None or parent.type not in ("paragraph_open", "heading_open"):
            expected = -1
        else:
            expected = end - first
        if len(content_lines) != expected:
            return Inline(token, first, content_lines, [None] * len(content_lines), False)
        columns = [
            self._line_column(self.lines[first + k], line) for k, line in enumerate(content_lines)
        ]
        return Inline(token, first, content_lines, columns)

    def _row(self, cells: list[Token], wanted: Callable[[Token], bool]) -> Iterator[Inline]:
        # Cells are found left to right; an escaped pipe makes content differ from source.
        line = cells[0].map[0] if cells[0].map else len(self.lines)
        text = self.lines[line] if line < len(self.lines) else ""
        cursor: int | None = 0
        for cell in cells:
            column = None
            if cursor is not None and "|" not in cell.content:
                found = text.find(cell.content, cursor)
                column = found if found >= 0 else None
            cursor = None if column is None else column + len(cell.content)
            if wanted(cell):
                yield Inline(cell, line, [cell.content], [column])

    @staticmethod
    def _line_column(doc_line: str, content_line: str) -> int | None:
        # Content is the line minus container markers and indentation (where markdown-it
        # may have expanded tabs to spaces) and, on the last line, trailing whitespace.
        lead = len(content_line) - len(content_line.lstrip(" \t"))
        found = doc_line.rfind(content_line[lead:])
        return None if found < 0 else found - lead

    def parse(self, inline: Inline) -> Events:
        """Parses one inline token's content and returns where its events are."""
        state = StateInline(inline.token.content, MD, self.env, [])
        trace = _Trace(state)
        self.env[_TRACE_KEY] = trace
        try:
            MD.inline.tokenize(state)
        finally:
            del self.env[_TRACE_KEY]
        return _events(trace.attempts, state, self.env)

    def join(self, lines: list[str]) -> str:
        """The document text of `lines`, with the original final newline."""
        return "\n".join(lines) + ("\n" if self.final_newline else "")


def document_span(inline: Inline, start: int, end: int) -> tuple[int, int, int] | None:
    """A single-line content span -> (document line, start column, end column)."""
    line, column = inline.position(start)
    base = inline.columns[line]
    if base is None:
        return None
    return inline.first_line + line, base + column, base + column + end - start


def _events(attempts: list[_Attempt], state: StateInline, env: dict[str, object]) -> Events:
    """Reads the rule attempts and the tokens pushed between them as events."""
    src, tokens = state.src, state.tokens
    attempts.append(_Attempt(len(src), 0, len(src), len(tokens)))  # the end, as an attempt
    probe = StateInline(src, MD, env, [])  # a clean state for re-tracing destinations
    events = Events()
    for index, attempt in enumerate(attempts[:-1]):
        group = tokens[attempt.first_token : attempts[index + 1].first_token]
        if src[attempt.pos] == "\n":
            hard = any(token.type == "hardbreak" for token in group)
            events.newlines.append((attempt.pos, hard, attempt.link_level > 0))
            continue
        for token in group:
            if token.type == "code_inline":
                events.code_spans.append((attempt.pos, _end(attempts, index)))
            elif token.type == "link_open" and token.markup == "autolink":
                end = _end(attempts, index)
                # E-mail autolinks have no scheme and nothing percent-encoded to decode.
                if ":" in src[attempt.pos + 1 : end - 1]:
                    target = Target(attempt.pos + 1, end - 1, attempt.pos, True, False)
                    events.targets.append(target)
            elif token.type in ("link_open", "image"):
                image = token.type == "image"
                label = attempt.pos + 1 if image else attempt.pos
                end = _end(attempts, index)
                target = _inline_destination(probe, attempt.pos, label, not image, end)
                if target is not None:
                    events.targets.append(target)
    return events


def _end(attempts: list[_Attempt], index: int) -> int:
    """Where the rule that matched at `attempts[index]` ended."""
    here, after = attempts[index], attempts[index + 1]
    if after.pos_max > here.pos_max:
        return here.pos_max  # the last rule inside a link label ends with the label
    if after.pos_max == here.pos_max:
        return after.pos
    # A link whose label was tokenized next: it ends where its level resumes.
    return next(a.pos for a in attempts[index + 1 :] if a.pos_max >= here.pos_max)


def _inline_destination(
    state: StateInline, start: int, label: int, disable_nested: bool, rule_end: int
) -> Target | None:
    """Re-traces the link or image that matched from `start` to `rule_end`.

    The rule's own helpers are run again; the result is used only if it ends exactly where
    the rule ended (so a reference link, whose destination lives elsewhere, is never taken
    for an inline one).
    """
    helpers, src, maximum = MD.helpers, state.src, state.posMax
    label_end = helpers.parseLinkLabel(state, label, disable_nested)
    pos = label_end + 1
    if label_end < 0 or pos >= maximum or src[pos] != "(":
        return None
    pos += 1
    after_newline = False
    while pos < maximum and src[pos] in " \t\n":
        after_newline = after_newline or src[pos] == "\n"
        pos += 1
    destination = helpers.parseLinkDestination(src, pos, maximum)
    if not destination.ok or not MD.validateLink(MD.normalizeLink(destination.str)):
        return None
    dest_start, pos = pos, destination.pos
    gap = pos
    while pos < maximum and src[pos] in " \t\n":
        pos += 1
    title = helpers.parseLinkTitle(src, pos, maximum)
    if pos < maximum and gap != pos and title.ok:
        pos = title.pos
        while pos < maximum and src[pos] in " \t\n":
            pos += 1
    if pos >= maximum or src[pos] != ")" or pos + 1 != rule_end:
        return None
    return Target(dest_start, destination.pos, start, False, after_newline)
