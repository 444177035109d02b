"""Rule 5 (trailing spaces, blank-line runs) with rule 6's link edits, in one pass.

Both need the same inline parse of the paragraphs whose lines end in spaces or hold a
percent-encoded destination, so they share it; the lines are then written out once.
"""

from dataclasses import dataclass, field

from markdown_it.token import Token

from rag_pipeline.core.sanitize.characters import add
from rag_pipeline.core.sanitize.links import PERCENT_ESCAPE_RE, target_edit
from rag_pipeline.core.sanitize.structure import Document, Events, Inline
from rag_pipeline.core.sanitize.zero_width import VERBATIM_BLOCKS


def needs_whitespace_rule(text: str) -> bool:
    """True when rule 5 could change `text`."""
    return (
        " \n" in text
        or "\t\n" in text
        or text.endswith((" ", "\t"))
        or "\n\n\n" in text
        or text.startswith("\n\n")
    )


def needs_link_rule(text: str) -> bool:
    """True when rule 6 could change `text`."""
    return ("](" in text or "<" in text) and bool(PERCENT_ESCAPE_RE.search(text))


def _wants_links(token: Token) -> bool:
    content = token.content
    return ("](" in content or "<" in content) and bool(PERCENT_ESCAPE_RE.search(content))


@dataclass
class _Lines:
    """What the parse says about each line: a byte flag per line, and edits by line."""

    trailing: bytearray
    kept: bytearray  # in a verbatim block or a table: byte for byte
    exact: bytearray  # line end inside a code span, raw HTML, link title ...
    empty_item: bytearray  # an empty list item: the blank lines after it are kept
    hard: bytearray  # trailing spaces that make a hard break
    edits: dict[int, list[tuple[int, int, str]]] = field(default_factory=lambda: {})


def normalize_whitespace_and_links(doc: Document, counts: dict[str, int]) -> str:
    """Rules 5 and 6 on a parsed document."""
    return _write(doc, _read(doc, counts), counts)


def _read(doc: Document, counts: dict[str, int]) -> _Lines:
    lines = doc.lines
    flags = _Lines(
        trailing=bytearray(line.endswith((" ", "\t")) for line in lines),
        kept=doc.block_lines(VERBATIM_BLOCKS | {"table_open"}),
        exact=bytearray(len(lines)),
        empty_item=bytearray(len(lines)),
        hard=bytearray(len(lines)),
    )
    # markdown-it ends a list when an empty item is followed by two blank lines but not by
    # one, so the blank lines after an empty item are not collapsed.
    for token in doc.tokens:
        first = token.map[0] if token.map else len(lines)
        if token.type == "list_item_open" and first < len(lines):
            flags.empty_item[first] = lines[first].rstrip(" \t").endswith(token.markup)

    def wanted(token: Token) -> bool:
        if _wants_links(token):
            return True
        # Only a line that ends inside the content can hold a hard break or a code span's
        # line end; the last line's trailing whitespace is trimmed by the parser anyway.
        span = token.map or [0, 0]
        return 1 in flags.trailing[span[0] : span[1] - 1]

    for inline in doc.inlines(wanted):
        if not inline.aligned:
            first, end = inline.first_line, min((inline.token.map or [0, 0])[1], len(lines))
            flags.exact[first:end] = b"\x01" * max(end - first, 0)
            continue
        events = _read_breaks(doc, inline, flags)
        first_lt = inline.token.content.find("<")
        for target in events.targets:
            edit = target_edit(inline, target, 0 <= first_lt < target.link_start)
            if edit:
                line, start, end, replacement = edit
                flags.edits.setdefault(line, []).append((start, end, replacement))
                add(counts, "percent_decoded", 1)
    return flags


def _read_breaks(doc: Document, inline: Inline, flags: _Lines) -> Events:
    """Flags the hard breaks and exact line ends of one inline token; returns its events."""
    content = inline.token.content
    if not _wants_links(inline.token) and not any(char in content for char in "`<["):
        # Nothing here can swallow a line end (no code span, raw HTML, link title or
        # label), so markdown-it's newline rule fires at each one, and it makes a hard
        # break exactly when the line ends with two spaces.
        breaks = {k: (line.endswith("  "), False) for k, line in enumerate(inline.lines)}
        events = Events()
    else:
        events = doc.parse(inline)
        breaks = {
            inline.position(pos)[0]: (is_hard, in_label)
            for pos, is_hard, in_label in events.newlines
        }
    for k in range(len(inline.lines) - 1):
        line = inline.first_line + k
        if not flags.trailing[line]:
            continue
        seen = breaks.get(k)
        if seen is None or (seen[0] and seen[1]):
            flags.exact[line] = 1  # a reference label must keep its exact text
        elif seen[0]:
            flags.hard[line] = 1
    return events


def _write(doc: Document, flags: _Lines, counts: dict[str, int]) -> str:
    lines = doc.lines
    out: list[str] = []
    blank_run = 0
    for number, line in enumerate(lines):
        if number in flags.edits:
            line = _splice(line, flags.edits[number])
        elif line and not flags.trailing[number] and not flags.empty_item[number]:
            out.append(line)  # the common case: nothing to do
            blank_run = 0
            continue
        if flags.kept[number]:
            out.append(line)
            blank_run = 0
            continue
        line = _trimmed(line, number, flags, counts)
        if line:
            # A negative run never reaches 2: every blank line after an empty item stays.
            blank_run = -len(lines) if flags.empty_item[number] else 0
        else:
            blank_run += 1
            if blank_run > 1:
                add(counts, "blank_lines_collapsed", 1)
                continue
        out.append(line)
    return doc.join(out)


def _trimmed(line: str, number: int, flags: _Lines, counts: dict[str, int]) -> str:
    stripped = line.rstrip(" \t")
    hard = flags.hard[number]
    # Never leave a backslash at the line end: it would become a hard break. A hard
    # break after `*`, `_` or `~` keeps its spaces: a backslash there (punctuation, not
    # whitespace) would make the delimiter left-flanking and open emphasis.
    if (
        stripped == line
        or flags.exact[number]
        or stripped.endswith("\\")
        or (hard and stripped.endswith(("*", "_", "~")))
    ):
        return line
    if hard:
        add(counts, "hard_breaks_normalized", 1)
        return stripped + "\\"
    add(counts, "trailing_spaces_removed", 1)
    return stripped


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
