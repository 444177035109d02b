r"""Sanitizing Markdown before it is stored and embedded (seed ADR-067, done right).

The seed's TextSanitizer URL-decoded whole documents and collapsed every run of spaces; both
corrupt real content (`50% off`, `a+b`, code indentation, aligned tables). Here every rule
is scoped: character-level repairs (rules 1-3) apply everywhere, the Markdown-aware rules
(4-7) use markdown-it-py's block token maps and recording wrappers around its own inline
rules, so code, tables and prose are told apart by the same parser that renders them.

Rules, applied in this order:

1. Lone surrogates (and invalid UTF-8 in `sanitize_bytes`) become U+FFFD; a surrogate pair
   left in a `str` (CESU-8, `surrogatepass`) is joined into its code point.
2. NUL and C0/C1 controls except `\n` and `\t` are removed; `\r\n`, `\r`, U+2028 and
   U+2029 become `\n`; the 66 Unicode noncharacters are removed.
3. Unicode NFC.
4. U+200B, U+2060 and U+FEFF are removed outside code (fenced and indented code blocks,
   HTML blocks, inline code spans). Decision: the joiners U+200C (ZWNJ) and U+200D (ZWJ)
   carry meaning in emoji ZWJ sequences and in Persian and Indic spelling, so a joiner is
   kept when both neighbours are non-ASCII, non-space characters and removed otherwise (a
   stray joiner at a word edge or next to ASCII is noise). Bidi marks (U+200E/U+200F) are
   text. A removal can change what is code (a leading U+FEFF hides a fence), so the rule
   re-parses until nothing kept in code moves out of it; after a few passes (adversarial
   input only) the characters are removed everywhere.
5. Trailing spaces and tabs are removed and runs of two or more blank lines become one
   (decision: the seed's `\n{3,}` -> `\n\n`). Lines of fenced, indented and HTML blocks and
   of GFM tables are kept byte for byte, and so is a line whose end lies inside a code
   span, raw HTML or link title. Decision: a hard break made of trailing spaces becomes a
   backslash hard break, so the break survives with no trailing space; it keeps its spaces
   where a backslash would change the meaning (after `\`, `*`, `_`, `~`, or in a link
   label). Blank lines after an empty list item are kept (markdown-it ends the list after
   two of them but not after one).
6. Percent-escapes inside link and image destinations and URL autolinks are decoded where
   the character is a visible non-ASCII one or a space and markdown-it's normalized href
   stays the same. Decision: a destination that gains a space is written in the pointy
   form `[x](<a b>)`, which CommonMark allows (an autolink cannot hold a space, so there
   `%20` stays); reserved ASCII (`%2F`, `%3F`, `%25` ...) stays encoded because decoding it
   would change the URL (or, for `%25`, not be idempotent). Prose, link titles, code and
   reference definitions are never percent-decoded.
7. With `decode_entities=True`, entity references outside code become the characters they
   stand for, exactly once and without changing what the Markdown renders: `&amp;lt;`
   becomes `\&lt;` (the text "&lt;"), never `<`; `&#42;` becomes `\*`.

The result is NFC, free of `FORBIDDEN_CHARACTERS`, UTF-8 encodable, and a fixed point:
sanitizing it again changes nothing and reports no counts. Text that no Markdown-aware
rule would touch is never parsed (a few C-speed scans: about 0.1 s for 10 MB); otherwise
the block parse costs about 0.7 s per MB and only the inline tokens a rule needs are parsed.
"""

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

from markdown_it import MarkdownIt
from markdown_it.common.utils import unescapeAll
from markdown_it.helpers import parseLinkDestination, parseLinkLabel, parseLinkTitle
from markdown_it.rules_inline import StateInline
from markdown_it.rules_inline import autolink as _autolink_rule
from markdown_it.rules_inline import backtick as _backtick_rule
from markdown_it.rules_inline import entity as _entity_rule
from markdown_it.rules_inline import image as _image_rule
from markdown_it.rules_inline import link as _link_rule
from markdown_it.rules_inline import newline as _newline_rule
from markdown_it.rules_inline.autolink import AUTOLINK_RE
from markdown_it.token import Token

__all__ = [
    "FORBIDDEN_CHARACTERS",
    "SANITIZER_VERSION",
    "SanitizeResult",
    "decode_percent_encoded",
    "find_forbidden",
    "sanitize_bytes",
    "sanitize_text",
]

SANITIZER_VERSION: Final = "2026.11.1"

_ASTRAL_NONCHARACTERS: Final = "".join(
    f"\\U{plane:04x}fffe\\U{plane:04x}ffff" for plane in range(1, 0x11)
)
_NONCHARACTERS: Final = "\ufdd0-\ufdef\ufffe\uffff" + _ASTRAL_NONCHARACTERS
FORBIDDEN_CHARACTERS: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff" + _NONCHARACTERS + "]"
)
"""Matches any character that sanitized text may not contain."""

_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")
# Astral ranges make a character class several times slower to scan, so rule 2 scans the
# BMP class and looks for astral noncharacters only in text that has astral characters.
_RULE2_BMP_RE: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufdd0-\ufdef\ufffe\uffff]"
)
_ASTRAL_RE: Final = re.compile("[\U00010000-\U0010ffff]")
_ASTRAL_NONCHARACTER_RE: Final = re.compile("[" + _ASTRAL_NONCHARACTERS + "]")
_CONTROL_RE: Final = re.compile("[\x01-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_BMP_NONCHARACTER_RE: Final = re.compile("[\ufdd0-\ufdef\ufffe\uffff]")

_ZERO_WIDTH: Final = "\u200b\u200c\u200d\u2060\ufeff"
_ZERO_WIDTH_RE: Final = re.compile(f"[{_ZERO_WIDTH}]")
# A joiner survives only between two "real" non-ASCII characters (emoji, Arabic, Indic ...).
_JOINER_NEIGHBOUR: Final = rf"[^\x00-\x7f\s{_ZERO_WIDTH}]"
_ZERO_WIDTH_REMOVABLE_RE: Final = re.compile(
    rf"[\u200b\u2060\ufeff]|(?<!{_JOINER_NEIGHBOUR})[\u200c\u200d]"
    rf"|[\u200c\u200d](?!{_JOINER_NEIGHBOUR})"
)

_PERCENT_RUN_RE: Final = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_PERCENT_ESCAPE_RE: Final = re.compile(r"%[0-9a-fA-F]{2}")
# What markdown-it's entity rule would read as an entity after a decoded `&`.
_ENTITY_LIKE_RE: Final = re.compile(
    r"&(?:#[xX][0-9a-fA-F]{1,6}|#[0-9]{1,7}|[A-Za-z][A-Za-z0-9]{1,31});"
)
# Enough following text to tell whether a decoded `&` would start an entity reference.
_LOOKAHEAD: Final = 40
_ASCII_LETTERS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

# Blocks whose lines are content, not prose: never trimmed, never stripped of zero-widths.
_VERBATIM_BLOCKS: Final = frozenset({"fence", "code_block", "html_block"})
# Structure-dependent zero-width removal can uncover new prose (a removed U+FEFF turns a
# paragraph into a fence); after this many re-parses only adversarial input is left.
_MAX_ZERO_WIDTH_PASSES: Final = 4
_ENV_KEY: Final = "rag_pipeline.sanitize.events"


@dataclass(frozen=True)
class SanitizeResult:
    """Sanitized text and how often each rule changed it.

    Attributes:
        text: The sanitized text.
        counts: Changes per rule, only non-zero entries. Keys: `invalid_utf8_repaired`,
            `surrogates_repaired`, `surrogate_pairs_joined`, `nul_removed`,
            `controls_removed`, `newlines_normalized`, `noncharacters_removed`,
            `nfc_changed` (0/1), `zero_width_removed`, `trailing_spaces_removed` (lines),
            `hard_breaks_normalized`, `blank_lines_collapsed`, `percent_decoded` (link
            targets), `entities_decoded`.
    """

    text: str
    counts: dict[str, int] = field(default_factory=lambda: {})


def sanitize_bytes(data: bytes, *, decode_entities: bool = False) -> SanitizeResult:
    """Decodes UTF-8, repairing invalid sequences to U+FFFD, then applies `sanitize_text`.

    Args:
        data: Raw bytes, expected to be UTF-8.
        decode_entities: Passed on to `sanitize_text`.

    Returns:
        The sanitized text; `invalid_utf8_repaired` counts the replaced byte sequences.
    """
    text = data.decode("utf-8", "replace")
    # A U+FFFD already present in the input is exactly one EF BF BD sequence: the decoder
    # starts a new sequence at every lead byte, so the difference is the repairs made.
    repaired = text.count("\ufffd") - data.count(b"\xef\xbf\xbd")
    result = sanitize_text(text, decode_entities=decode_entities)
    if not repaired:
        return result
    return SanitizeResult(result.text, {"invalid_utf8_repaired": repaired, **result.counts})


def sanitize_text(text: str, *, decode_entities: bool = False) -> SanitizeResult:
    """Sanitizes Markdown for storage in PostgreSQL and for embedding.

    Args:
        text: Markdown; may hold lone surrogates, controls and any Unicode.
        decode_entities: Also decode HTML entity references outside code (rule 7), for
            sources whose text still carries them.

    Returns:
        The sanitized text and the per-rule counts (see the module docstring).
    """
    counts: dict[str, int] = {}
    # Every check below is a C-speed scan; Markdown is parsed only when a rule needs it.
    ascii_only = text.isascii()
    if not ascii_only:
        text = _repair_surrogates(text, counts)
    text = _remove_controls(text, counts, ascii_only)
    if not ascii_only:
        text = _nfc(text, counts)
        if _ZERO_WIDTH_RE.search(text):
            text = _remove_zero_width(text, counts)
    if _needs_whitespace_rule(text) or _needs_link_rule(text):
        text = _normalize_whitespace_and_links(_Document(text), counts)
    if decode_entities and _ENTITY_LIKE_RE.search(text):
        text = _decode_entities(_Document(text), counts)
    if counts.get("percent_decoded") or counts.get("entities_decoded"):
        text = _nfc(text, counts)
    return SanitizeResult(text, {key: value for key, value in counts.items() if value})


def decode_percent_encoded(value: str) -> str:
    """Decodes `%XX` runs of a URL or wiki title where they form valid, visible UTF-8.

    `+` is left alone (it is only a space in form encoding), as are invalid escapes such as
    `%ZZ`, a lone `%`, bytes that are not valid UTF-8, and escapes of invisible characters
    (controls, format characters, separators other than the space).

    Args:
        value: A percent-encoded value, e.g. `Main%20Page` or `Caf%C3%A9`.

    Returns:
        The value with every decodable escape decoded, e.g. `Main Page`, `Café`.
    """
    decoded, _ = _decode_percent(value, str.isprintable)
    return decoded


def find_forbidden(text: str) -> list[tuple[int, str]]:
    """Lists every forbidden character of `text` for an error message.

    Args:
        text: Text that should have been sanitized.

    Returns:
        `(offset, repr(character))` for each match of `FORBIDDEN_CHARACTERS`.
    """
    return [(match.start(), repr(match.group())) for match in FORBIDDEN_CHARACTERS.finditer(text)]


# --- rules 1-3: characters -------------------------------------------------------------


def _add(counts: dict[str, int], key: str, value: int) -> None:
    if value:
        counts[key] = counts.get(key, 0) + value


def _repair_surrogates(text: str, counts: dict[str, int]) -> str:
    if not _SURROGATE_RE.search(text):
        return text
    # UTF-16 with surrogatepass joins well-formed pairs; "replace" turns each lone one
    # into exactly one U+FFFD, so lengths and U+FFFD counts give both numbers.
    repaired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    _add(counts, "surrogate_pairs_joined", len(text) - len(repaired))
    _add(counts, "surrogates_repaired", repaired.count("\ufffd") - text.count("\ufffd"))
    return repaired


def _remove_controls(text: str, counts: dict[str, int], ascii_only: bool) -> str:
    astral = not ascii_only and bool(_ASTRAL_RE.search(text))
    if not _RULE2_BMP_RE.search(text) and not (astral and _ASTRAL_NONCHARACTER_RE.search(text)):
        return text
    newlines = text.count("\r\n")
    text = text.replace("\r\n", "\n")
    for separator in ("\r", "\u2028", "\u2029"):
        found = text.count(separator)
        if found:
            newlines += found
            text = text.replace(separator, "\n")
    _add(counts, "newlines_normalized", newlines)
    nul = text.count("\x00")
    if nul:
        _add(counts, "nul_removed", nul)
        text = text.replace("\x00", "")
    text, removed = _CONTROL_RE.subn("", text)
    _add(counts, "controls_removed", removed)
    text, removed = _BMP_NONCHARACTER_RE.subn("", text)
    if astral:
        text, more = _ASTRAL_NONCHARACTER_RE.subn("", text)
        removed += more
    _add(counts, "noncharacters_removed", removed)
    return text


def _nfc(text: str, counts: dict[str, int]) -> str:
    if unicodedata.is_normalized("NFC", text):
        return text
    counts["nfc_changed"] = 1
    return unicodedata.normalize("NFC", text)


# --- Markdown structure -------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    """A link/image destination or URL autolink body, as offsets into inline content."""

    start: int
    end: int
    link_start: int
    autolink: bool
    after_newline: bool


@dataclass
class _Events:
    """What the recording inline rules saw while parsing one inline token's content."""

    code_spans: list[tuple[int, int]] = field(default_factory=lambda: [])
    newlines: list[tuple[int, bool, bool]] = field(default_factory=lambda: [])
    targets: list[_Target] = field(default_factory=lambda: [])
    entities: list[tuple[int, int, str, bool]] = field(default_factory=lambda: [])
    # > 0 while an image's alt text is parsed: it has its own source string.
    nested: int = 0


def _events(state: StateInline) -> _Events | None:
    events = state.env.get(_ENV_KEY)
    if isinstance(events, _Events) and events.nested == 0:
        return events
    return None


def _record_backtick(state: StateInline, silent: bool) -> bool:
    start, count = state.pos, len(state.tokens)
    if not _backtick_rule(state, silent):
        return False
    events = None if silent else _events(state)
    if events is not None and len(state.tokens) > count and state.tokens[-1].type == "code_inline":
        events.code_spans.append((start, state.pos))
    return True


def _record_newline(state: StateInline, silent: bool) -> bool:
    start, count = state.pos, len(state.tokens)
    if not _newline_rule(state, silent):
        return False
    events = None if silent else _events(state)
    if events is not None:
        hard = len(state.tokens) > count and state.tokens[-1].type == "hardbreak"
        events.newlines.append((start, hard, state.linkLevel > 0))
    return True


def _record_entity(state: StateInline, silent: bool) -> bool:
    start, count = state.pos, len(state.tokens)
    if not _entity_rule(state, silent):
        return False
    events = None if silent else _events(state)
    if events is not None and len(state.tokens) > count and state.tokens[-1].info == "entity":
        decoded = state.tokens[-1].content
        events.entities.append((start, state.pos, decoded, state.linkLevel > 0))
    return True


def _record_autolink(state: StateInline, silent: bool) -> bool:
    start = state.pos
    if not _autolink_rule(state, silent):
        return False
    events = None if silent else _events(state)
    # E-mail autolinks have no scheme and nothing percent-encoded to decode.
    if events is not None and ":" in state.src[start + 1 : state.pos - 1]:
        events.targets.append(_Target(start + 1, state.pos - 1, start, True, False))
    return True


def _record_link(state: StateInline, silent: bool) -> bool:
    start = state.pos
    if not _link_rule(state, silent):
        return False
    events = None if silent else _events(state)
    if events is not None and (target := _inline_destination(state, start, start, True)):
        events.targets.append(target)
    return True


def _record_image(state: StateInline, silent: bool) -> bool:
    start = state.pos
    events = state.env.get(_ENV_KEY)
    if isinstance(events, _Events):
        events.nested += 1
    try:
        matched = _image_rule(state, silent)
    finally:
        if isinstance(events, _Events):
            events.nested -= 1
    found = None if silent or not matched else _events(state)
    if found is not None and (target := _inline_destination(state, start, start + 1, False)):
        found.targets.append(target)
    return matched


def _inline_destination(
    state: StateInline, start: int, label: int, disable_nested: bool
) -> _Target | None:
    """Re-traces the link rule that just matched at `start` to find its destination.

    markdown-it keeps no inline source positions, so the rule's own helpers are run again;
    the result is used only if it ends exactly where the rule ended (so a reference link,
    whose destination lives elsewhere, is never taken for an inline one).
    """
    src, maximum = state.src, state.posMax
    label_end = parseLinkLabel(state, label, disable_nested)
    pos = label_end + 1
    if label_end < 0 or pos >= maximum or src[pos] != "(":
        return None
    pos += 1
    after_newline = False
    while pos < maximum and src[pos] in " \t\n":
        after_newline = after_newline or src[pos] == "\n"
        pos += 1
    destination = parseLinkDestination(src, pos, maximum)
    if not destination.ok or not state.md.validateLink(state.md.normalizeLink(destination.str)):
        return None
    dest_start, pos = pos, destination.pos
    gap = pos
    while pos < maximum and src[pos] in " \t\n":
        pos += 1
    title = parseLinkTitle(src, pos, maximum)
    if pos < maximum and gap != pos and title.ok:
        pos = title.pos
        while pos < maximum and src[pos] in " \t\n":
            pos += 1
    if pos >= maximum or src[pos] != ")" or pos + 1 != state.pos:
        return None
    return _Target(dest_start, destination.pos, start, False, after_newline)


def _build_parser() -> MarkdownIt:
    md = MarkdownIt("commonmark").enable("table")
    # Inline content is parsed only for the few tokens a rule needs, with a recorder in env.
    md.core.ruler.disable("inline")
    md.inline.ruler.at("backticks", _record_backtick)
    md.inline.ruler.at("newline", _record_newline)
    md.inline.ruler.at("entity", _record_entity)
    md.inline.ruler.at("autolink", _record_autolink)
    md.inline.ruler.at("link", _record_link)
    md.inline.ruler.at("image", _record_image)
    return md


_MD: Final = _build_parser()


@dataclass
class _Inline:
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


class _Document:
    """Text split into lines, its block tokens, and helpers to map inline offsets back."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.final_newline = text.endswith("\n")
        self.lines = (text[:-1] if self.final_newline else text).split("\n")
        self.env: dict[str, object] = {}
        self.tokens = _MD.parse(text, self.env)

    def block_lines(self, kinds: frozenset[str]) -> bytearray:
        """Flags (1 per line) every line that lies in a block token of `kinds`."""
        flags = bytearray(len(self.lines))
        for token in self.tokens:
            if token.type in kinds and token.map:
                start, end = token.map
                flags[start:end] = b"\x01" * (min(end, len(flags)) - start)
        return flags

    def inlines(self, wanted: Callable[[Token], bool]) -> Iterator[_Inline]:
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

    def _aligned(self, token: Token, span: list[int], parent: Token | None) -> _Inline:
        first, end = span[0], min(span[1], len(self.lines))
        content_lines = token.content.split("\n")
        # An inline token's map covers exactly its content lines (a setext underline is
        # outside it); anything else is a layout this module does not rely on.
        if parent is None or parent.type not in ("paragraph_open", "heading_open"):
            expected = -1
        else:
            expected = end - first
        if len(content_lines) != expected:
            return _Inline(token, first, content_lines, [None] * len(content_lines), False)
        columns = [
            self._line_column(self.lines[first + k], line) for k, line in enumerate(content_lines)
        ]
        return _Inline(token, first, content_lines, columns)

    def _row(self, cells: list[Token], wanted: Callable[[Token], bool]) -> Iterator[_Inline]:
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
                yield _Inline(cell, line, [cell.content], [column])

    @staticmethod
    def _line_column(doc_line: str, content_line: str) -> int | None:
        # Content is the line minus container markers and indentation (where markdown-it
        # may have expanded tabs to spaces) and, on the last line, trailing whitespace.
        lead = len(content_line) - len(content_line.lstrip(" \t"))
        found = doc_line.rfind(content_line[lead:])
        return None if found < 0 else found - lead

    def parse(self, inline: _Inline) -> _Events:
        """Parses one inline token's content with the recording rules."""
        events = _Events()
        self.env[_ENV_KEY] = events
        try:
            _MD.inline.parse(inline.token.content, _MD, self.env, [])
        finally:
            del self.env[_ENV_KEY]
        return events

    def join(self, lines: list[str]) -> str:
        return "\n".join(lines) + ("\n" if self.final_newline else "")


def _document_span(inline: _Inline, start: int, end: int) -> tuple[int, int, int] | None:
    """A single-line content span -> (document line, start column, end column)."""
    line, column = inline.position(start)
    base = inline.columns[line]
    if base is None:
        return None
    return inline.first_line + line, base + column, base + column + end - start


# --- rule 4: zero-width characters ------------------------------------------------------------


def _remove_zero_width(text: str, counts: dict[str, int]) -> str:
    for _ in range(_MAX_ZERO_WIDTH_PASSES):
        text, removed, kept_in_code = _remove_zero_width_once(_Document(text))
        _add(counts, "zero_width_removed", removed)
        if removed:
            text = _nfc(text, counts)
        # Removal may change the structure (and so what is code) only if something was
        # removed; characters kept in code must then be checked against the new structure.
        if not removed or not kept_in_code:
            return text
    text, removed = _ZERO_WIDTH_REMOVABLE_RE.subn("", text)
    _add(counts, "zero_width_removed", removed)
    return _nfc(text, counts)


def _remove_zero_width_once(doc: _Document) -> tuple[str, int, bool]:
    text = doc.text
    verbatim = doc.block_lines(_VERBATIM_BLOCKS)
    line_starts = [0]
    for line in doc.lines[:-1]:
        line_starts.append(line_starts[-1] + len(line) + 1)
    protected: list[tuple[int, int]] = []
    for inline in doc.inlines(
        lambda t: "`" in t.content and bool(_ZERO_WIDTH_RE.search(t.content))
    ):
        spans = doc.parse(inline).code_spans
        if spans and not inline.aligned and inline.token.map:
            start, end = inline.token.map[0], min(inline.token.map[1], len(doc.lines))
            protected.append((line_starts[start], line_starts[end - 1] + len(doc.lines[end - 1])))
            continue
        for start, end in spans:
            protected.extend(_code_span_ranges(inline, start, end, line_starts, doc.lines))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(protected):  # merged, so one bisect finds the covering range
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    protected, protected_starts = merged, [start for start, _ in merged]

    pieces: list[str] = []
    last = removed = 0
    kept_in_code = False
    for match in _ZERO_WIDTH_RE.finditer(text):
        at = match.start()
        line = bisect_right(line_starts, at) - 1
        index = bisect_right(protected_starts, at) - 1
        if verbatim[line] or (index >= 0 and protected[index][0] <= at < protected[index][1]):
            kept_in_code = True
        elif _ZERO_WIDTH_REMOVABLE_RE.match(text, at):
            pieces.append(text[last:at])
            last = at + 1
            removed += 1
    if not removed:
        return text, 0, kept_in_code
    pieces.append(text[last:])
    return "".join(pieces), removed, kept_in_code


def _code_span_ranges(
    inline: _Inline, start: int, end: int, line_starts: list[int], lines: list[str]
) -> Iterator[tuple[int, int]]:
    """Absolute document ranges covered by a (possibly multi-line) code span."""
    first, first_column = inline.position(start)
    last, last_column = inline.position(end)
    for line in range(first, last + 1):
        doc_line = inline.first_line + line
        base = inline.columns[line]
        if base is None:  # cannot align: protect the whole line
            yield line_starts[doc_line], line_starts[doc_line] + len(lines[doc_line])
            continue
        begin = base + first_column if line == first else 0
        finish = base + last_column if line == last else len(lines[doc_line])
        yield line_starts[doc_line] + begin, line_starts[doc_line] + finish


# --- rules 5 and 6: whitespace and link targets ----------------------------------------------


def _has_trailing_space(line: str) -> bool:
    return line.endswith((" ", "\t"))


def _needs_whitespace_rule(text: str) -> bool:
    return (
        " \n" in text
        or "\t\n" in text
        or text.endswith((" ", "\t"))
        or "\n\n\n" in text
        or text.startswith("\n\n")
    )


def _needs_link_rule(text: str) -> bool:
    return ("](" in text or "<" in text) and bool(_PERCENT_ESCAPE_RE.search(text))


def _wants_links(token: Token) -> bool:
    content = token.content
    return ("](" in content or "<" in content) and bool(_PERCENT_ESCAPE_RE.search(content))


def _normalize_whitespace_and_links(doc: _Document, counts: dict[str, int]) -> str:
    lines = doc.lines
    trailing = bytearray(_has_trailing_space(line) for line in lines)
    kept = doc.block_lines(_VERBATIM_BLOCKS | {"table_open"})
    exact = bytearray(len(lines))  # line end inside a code span, raw HTML, link title ...
    # markdown-it ends a list when an empty item is followed by two blank lines but not by
    # one, so the blank lines after an empty item are not collapsed.
    empty_item = bytearray(len(lines))
    for token in doc.tokens:
        first = token.map[0] if token.map else len(lines)
        if token.type == "list_item_open" and first < len(lines):
            empty_item[first] = lines[first].rstrip(" \t").endswith(token.markup)
    hard = bytearray(len(lines))
    edits: dict[int, list[tuple[int, int, str]]] = {}

    def wanted(token: Token) -> bool:
        if _wants_links(token):
            return True
        # Only a line that ends inside the content can hold a hard break or a code span's
        # line end; the last line's trailing whitespace is trimmed by the parser anyway.
        span = token.map or [0, 0]
        return 1 in trailing[span[0] : span[1] - 1]

    for inline in doc.inlines(wanted):
        content = inline.token.content
        if not inline.aligned:
            first, end = inline.first_line, min((inline.token.map or [0, 0])[1], len(lines))
            exact[first:end] = b"\x01" * max(end - first, 0)
            continue
        if not _wants_links(inline.token) and not any(char in content for char in "`<["):
            # Nothing here can swallow a line end (no code span, raw HTML, link title or
            # label), so markdown-it's newline rule fires at each one, and it makes a hard
            # break exactly when the line ends with two spaces.
            breaks = {k: (line.endswith("  "), False) for k, line in enumerate(inline.lines)}
            events = _Events()
        else:
            events = doc.parse(inline)
            breaks = {
                inline.position(pos)[0]: (is_hard, in_label)
                for pos, is_hard, in_label in events.newlines
            }
        for k in range(len(inline.lines) - 1):
            line = inline.first_line + k
            if not trailing[line]:
                continue
            seen = breaks.get(k)
            if seen is None or (seen[0] and seen[1]):
                exact[line] = 1  # a reference label must keep its exact text
            elif seen[0]:
                hard[line] = 1
        first_lt = content.find("<")
        for target in events.targets:
            edit = _target_edit(inline, target, 0 <= first_lt < target.link_start)
            if edit:
                line, start, end, replacement = edit
                edits.setdefault(line, []).append((start, end, replacement))
                _add(counts, "percent_decoded", 1)

    out: list[str] = []
    blank_run = 0
    for number, line in enumerate(lines):
        if number in edits:
            line = _splice(line, edits[number])
        elif line and not trailing[number] and not empty_item[number]:
            out.append(line)  # the common case: nothing to do
            blank_run = 0
            continue
        if kept[number]:
            out.append(line)
            blank_run = 0
            continue
        stripped = line.rstrip(" \t")
        # Never leave a backslash at the line end: it would become a hard break. A hard
        # break after `*`, `_` or `~` keeps its spaces: a backslash there (punctuation, not
        # whitespace) would make the delimiter left-flanking and open emphasis.
        if (
            stripped != line
            and not exact[number]
            and not stripped.endswith("\\")
            and not (hard[number] and stripped.endswith(("*", "_", "~")))
        ):
            if hard[number]:
                stripped += "\\"
                _add(counts, "hard_breaks_normalized", 1)
            else:
                _add(counts, "trailing_spaces_removed", 1)
            line = stripped
        if line:
            # A negative run never reaches 2: every blank line after an empty item stays.
            blank_run = -len(lines) if empty_item[number] else 0
        else:
            blank_run += 1
            if blank_run > 1:
                _add(counts, "blank_lines_collapsed", 1)
                continue
        out.append(line)
    return doc.join(out)


def _splice(line: str, edits: list[tuple[int, int, str]]) -> str:
    """Applies non-overlapping `(start, end, replacement)` edits in one pass."""
    pieces: list[str] = []
    last = 0
    for start, end, replacement in sorted(edits):
        pieces.append(line[last:start])
        pieces.append(replacement)
        last = end
    pieces.append(line[last:])
    return "".join(pieces)


def _target_edit(
    inline: _Inline, target: _Target, html_before: bool
) -> tuple[int, int, int, str] | None:
    content = inline.token.content
    raw = content[target.start : target.end]
    if not _PERCENT_ESCAPE_RE.search(raw):
        return None
    span = _document_span(inline, target.start, target.end)
    if span is None:
        return None
    before = content[target.start - 1] if target.start else ""
    after = content[target.end : target.end + 1]
    replacement = _decoded_target(raw, target, html_before, before, after)
    if replacement is None:
        return None
    return *span, replacement


def _is_visible_non_ascii(char: str) -> bool:
    return char > "\x7f" and char.isprintable()


def _is_space(char: str) -> bool:
    return char == " "


def _is_visible_or_space(char: str) -> bool:
    return char == " " or _is_visible_non_ascii(char)


def _decoded_target(
    raw: str, target: _Target, html_before: bool, before: str, after: str
) -> str | None:
    """The most readable rewrite of a destination that keeps its href, or None."""
    if target.autolink:
        decoded, count = _decode_percent(raw, _is_visible_non_ascii)
        href = _canonical_href(_MD.normalizeLink(raw))
        if (
            count
            and AUTOLINK_RE.search(decoded)
            and _canonical_href(_MD.normalizeLink(decoded)) == href
            and unicodedata.is_normalized("NFC", before + decoded + after)
        ):
            return decoded
        return None

    pointy = raw.startswith("<")
    inner = raw[1:-1] if pointy else raw
    href = _canonical_href(_MD.normalizeLink(unescapeAll(inner)))
    # The pointy form is safe only where nothing before the link could pair with its `<`
    # or `>` and the destination does not start a line (where `<p x>` opens an HTML block).
    may_wrap = pointy or (
        not target.after_newline and not html_before and not any(char in inner for char in "<>\\")
    )
    for allowed in (_is_visible_or_space, _is_visible_non_ascii, _is_space):
        decoded, count = _decode_percent(inner, allowed)
        if not count or (" " in decoded and not may_wrap):
            continue
        candidate = f"<{decoded}>" if pointy or " " in decoded else decoded
        parsed = parseLinkDestination(candidate, 0, len(candidate))
        if (
            parsed.ok
            and parsed.pos == len(candidate)
            and _canonical_href(_MD.normalizeLink(parsed.str)) == href
            and unicodedata.is_normalized("NFC", before + candidate + after)
        ):
            return candidate
    return None


def _canonical_href(href: str) -> str:
    # %c3%a9 and %C3%A9 are the same URL; mdurl keeps the case it is given.
    return _PERCENT_ESCAPE_RE.sub(lambda match: match.group().upper(), href)


def _decode_percent(value: str, allowed: Callable[[str], bool]) -> tuple[str, int]:
    """Decodes each `%XX` run where it forms valid UTF-8 of `allowed` characters."""
    decoded_count = 0

    def decode_run(match: re.Match[str]) -> str:
        nonlocal decoded_count
        run = match.group()
        data = bytes.fromhex(run.replace("%", ""))
        out: list[str] = []
        index = 0
        while index < len(data):
            size = _utf8_length(data[index])
            char = None
            if size and index + size <= len(data):
                try:
                    char = data[index : index + size].decode("utf-8")
                except UnicodeDecodeError:
                    char = None
            if char is not None and allowed(char):
                out.append(char)
                decoded_count += 1
                index += size
            else:
                step = size if char is not None else 1
                out.append(run[3 * index : 3 * (index + step)])
                index += step
        return "".join(out)

    return _PERCENT_RUN_RE.sub(decode_run, value), decoded_count


def _utf8_length(lead: int) -> int:
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


# --- rule 7: entities ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entity:
    """An entity reference found by markdown-it, with the context that decides its fate."""

    begin: int  # document columns
    finish: int
    decoded: str
    before: str  # the content characters right before and after it
    after: str
    at_edge: bool  # only whitespace before or after it in its content line (or content)
    at_line_start: bool
    html_before: bool  # a raw `<` earlier in the same inline content


def _decode_entities(doc: _Document, counts: dict[str, int]) -> str:
    references = bool(doc.env.get("references"))
    found: dict[int, list[_Entity]] = {}
    for inline in doc.inlines(lambda token: "&" in token.content):
        content = inline.token.content
        if references and "[" in content:
            continue  # decoding could change a reference label and so what it links to
        first_lt = content.find("<")
        lo, hi = len(content) - len(content.lstrip()), len(content.rstrip())
        for start, end, decoded, in_label in doc.parse(inline).entities:
            span = _document_span(inline, start, end)
            if span is None or in_label:
                continue
            line, column = inline.position(start)
            text = inline.lines[line]
            at_line_start = column <= len(text) - len(text.lstrip())
            found.setdefault(span[0], []).append(
                _Entity(
                    begin=span[1],
                    finish=span[2],
                    decoded=decoded,
                    before=content[start - 1 : start],
                    after=content[end : end + 1],
                    at_edge=start <= lo
                    or end >= hi
                    or at_line_start
                    or column + end - start >= len(text.rstrip()),
                    at_line_start=at_line_start,
                    html_before=0 <= first_lt < start,
                )
            )

    lines = list(doc.lines)
    for number, entities in found.items():
        line = lines[number]
        pieces: list[str] = []
        end = len(line)
        following = ""  # the start of the final text after the current entity
        # Right to left, so the text after each entity is already final when deciding.
        for entity in sorted(entities, key=lambda e: e.begin, reverse=True):
            following = (line[entity.finish : end] + following)[:_LOOKAHEAD]
            replacement = _entity_replacement(entity, following)
            if replacement is None:
                replacement = line[entity.begin : entity.finish]
            else:
                _add(counts, "entities_decoded", 1)
            pieces.append(line[entity.finish : end])
            pieces.append(replacement)
            following = (replacement + following)[:_LOOKAHEAD]
            end = entity.begin
        pieces.append(line[:end])
        lines[number] = "".join(reversed(pieces))
    return doc.join(lines)


def _entity_replacement(entity: _Entity, following: str) -> str | None:
    """Markdown that renders like the entity did, or None to keep the entity."""
    decoded = entity.decoded
    if entity.html_before:
        # A raw `<` before could pair with a decoded `>`, quote or (Unicode) space as HTML.
        return None
    if all(char > "\x7f" for char in decoded):
        if any(char in "*_~" for char in entity.before + entity.after):
            return None  # would change emphasis flanking
        for char in decoded:
            category = unicodedata.category(char)
            if category == "Zs" and entity.at_edge:
                # markdown-it trims Unicode spaces from content and table lines
                return None
            if (
                not (char.isprintable() or category == "Zs")
                or category.startswith("M")
                or not unicodedata.is_normalized("NFC", char)
            ):
                return None
        return decoded
    if len(decoded) != 1:
        return None
    char = decoded
    if char.isalnum() or not char.isprintable() or char in " `":
        # Letters could complete an entity name; a backtick, even escaped, closes code spans.
        return None
    if char == "&":
        return "\\&" if _ENTITY_LIKE_RE.match("&" + following) else "&"
    if char == "<":
        starts_tag = following[:1] in _ASCII_LETTERS or following[:1] in ("/", "!", "?")
        return "\\<" if starts_tag else "<"
    if char == ">":
        return "\\>" if entity.at_line_start else ">"
    if char in "\"'":
        return char
    return "\\" + char
