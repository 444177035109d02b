"""Helpers shared by the chunker's example and property tests (no tests here)."""

import re
from collections.abc import Callable

from markdown_it import MarkdownIt

from rag_pipeline.core.models import Chunk

Counter = Callable[[str], int]
PARSER = MarkdownIt("commonmark").enable("table")
FENCE_LINE = re.compile(r"^[ >\t]*(`{3,}|~{3,})")
CLOSING_FENCE = re.compile(r"\n[ >\t]*(`{3,}|~{3,})")
# Any GFM delimiter row: optional outer pipes, alignment colons, spaces.
DELIMITER_ROW = re.compile(r"^[ >\t]*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


def decompose(doc: str, chunks: list[Chunk], index: int) -> tuple[str, str, str, str]:
    """Split a chunk's text into (overlap, synthetic prefix, own source slice, synthetic suffix).

    Asserts on the way that nothing else is in the text: the overlap is the tail of the
    previous chunk of the same section, the prefix a re-opened fence or a repeated table
    header, the suffix a closing fence.
    """
    current = chunks[index]
    own = doc[current.start_char : current.end_char]
    at = current.text.rfind(own)
    assert at >= 0, "the chunk's own source slice is not in its text"
    before, after = current.text[:at], current.text[at + len(own) :]
    assert after == "" or CLOSING_FENCE.fullmatch(after), repr(after)
    prefix = ""
    if before.endswith("\n") and not before.endswith("\n\n"):
        lines = before[:-1].split("\n")
        if FENCE_LINE.match(lines[-1]):
            prefix = lines[-1] + "\n"
        elif len(lines) >= 2 and DELIMITER_ROW.match(lines[-1]):
            prefix = "\n".join(lines[-2:]) + "\n"
    overlap = before[: len(before) - len(prefix)]
    if overlap:
        assert index > 0
        previous = chunks[index - 1]
        assert previous.section_ordinal == current.section_ordinal
        assert overlap.strip()
        assert previous.text.endswith(overlap.strip())
    return overlap, prefix, own, after
