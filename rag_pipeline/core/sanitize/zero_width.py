"""Rule 4: zero-width characters removed outside code.

A removal can change what is code (a leading U+FEFF hides a fence), so the rule re-parses
until nothing kept in code moves out of it; after a few passes (adversarial input only) the
characters are removed everywhere.
"""

import re
from bisect import bisect_right
from collections.abc import Iterator
from typing import Final

from rag_pipeline.core.sanitize.characters import add, nfc
from rag_pipeline.core.sanitize.structure import Document, Inline

_ZERO_WIDTH: Final = "\u200b\u200c\u200d\u2060\ufeff"
ZERO_WIDTH_RE: Final = re.compile(f"[{_ZERO_WIDTH}]")
# A joiner survives only between two "real" non-ASCII characters (emoji, Arabic, Indic ...).
_JOINER_NEIGHBOUR: Final = rf"[^\x00-\x7f\s{_ZERO_WIDTH}]"
_ZERO_WIDTH_REMOVABLE_RE: Final = re.compile(
    rf"[\u200b\u2060\ufeff]|(?<!{_JOINER_NEIGHBOUR})[\u200c\u200d]"
    rf"|[\u200c\u200d](?!{_JOINER_NEIGHBOUR})"
)
# Blocks whose lines are content, not prose: never trimmed, never stripped of zero-widths.
VERBATIM_BLOCKS: Final = frozenset({"fence", "code_block", "html_block"})
# Structure-dependent zero-width removal can uncover new prose (a removed U+FEFF turns a
# paragraph into a fence); after this many re-parses only adversarial input is left.
_MAX_ZERO_WIDTH_PASSES: Final = 4


def remove_zero_width(text: str, counts: dict[str, int]) -> str:
    """Rule 4 on a text that holds zero-width characters."""
    for _ in range(_MAX_ZERO_WIDTH_PASSES):
        text, removed, kept_in_code = _remove_zero_width_once(Document(text))
        add(counts, "zero_width_removed", removed)
        if removed:
            text = nfc(text, counts)
        # Removal may change the structure (and so what is code) only if something was
        # removed; characters kept in code must then be checked against the new structure.
        if not removed or not kept_in_code:
            return text
    text, removed = _ZERO_WIDTH_REMOVABLE_RE.subn("", text)
    add(counts, "zero_width_removed", removed)
    return nfc(text, counts)


def _remove_zero_width_once(doc: Document) -> tuple[str, int, bool]:
    text = doc.text
    verbatim = doc.block_lines(VERBATIM_BLOCKS)
    line_starts = [0]
    for line in doc.lines[:-1]:
        line_starts.append(line_starts[-1] + len(line) + 1)
    protected = _code_span_ranges(doc, line_starts)
    protected_starts = [start for start, _ in protected]
    pieces: list[str] = []
    last = removed = 0
    kept_in_code = False
    for match in ZERO_WIDTH_RE.finditer(text):
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


def _code_span_ranges(doc: Document, line_starts: list[int]) -> list[tuple[int, int]]:
    """The document ranges inside code spans, merged and sorted."""
    protected: list[tuple[int, int]] = []
    for inline in doc.inlines(lambda t: "`" in t.content and bool(ZERO_WIDTH_RE.search(t.content))):
        spans = doc.parse(inline).code_spans
        if spans and not inline.aligned and inline.token.map:
            start, end = inline.token.map[0], min(inline.token.map[1], len(doc.lines))
            protected.append((line_starts[start], line_starts[end - 1] + len(doc.lines[end - 1])))
            continue
        for start, end in spans:
            protected.extend(_span_ranges(inline, start, end, line_starts, doc.lines))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(protected):  # merged, so one bisect finds the covering range
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _span_ranges(
    inline: Inline, start: int, end: int, line_starts: list[int], lines: list[str]
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
