"""Content rules the asset checks enforce, as pure functions."""

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

from rag_pipeline.core.sanitize import find_forbidden

# Words of Editor.js saved data: their absence lets the check skip parsing (the usual case).
EDITORJS_SYNTAX = ('"blocks"', '"type"', '"data"')
# Editor.js structure in JSON syntax, not the words alone: a `"blocks": [` list, or a block's
# `"type": "…", "data": {`. Prose that mentions `"data":` or `"blocks":` is not a leak.
_STRUCTURE = (
    re.compile(r'"blocks"\s*:\s*\['),
    re.compile(r'"type"\s*:\s*"[^"\n]{0,64}"\s*,\s*"data"\s*:\s*\{'),
    re.compile(r'"data"\s*:\s*\{[^{}\n]{0,200}\}\s*,\s*"type"\s*:\s*"'),
)
_PARSER = MarkdownIt("commonmark")


def _prose(tokens: list[Token]) -> list[str]:
    """Text outside code blocks and inline code spans (where JSON may legitimately be quoted)."""
    parts: list[str] = []
    for token in tokens:
        if token.type in ("fence", "code_block", "code_inline"):
            continue
        if token.children:
            parts.extend(_prose(token.children))
        elif token.content:
            parts.append(token.content)
    return parts


def editorjs_structure_leaks(markdown: str) -> list[str]:
    """Editor.js JSON structure found in prose: what a BLK document's raw JSON leaves behind."""
    if not any(word in markdown for word in EDITORJS_SYNTAX):
        return []
    text = "\n".join(_prose(_PARSER.parse(markdown)))
    return [found[0] for pattern in _STRUCTURE if (found := pattern.search(text))]


def forbidden_characters(text: str, limit: int = 5) -> str | None:
    """A description of the first forbidden characters in sanitized text, or None."""
    found = find_forbidden(text)
    if not found:
        return None
    shown = ", ".join(f"{char} at {offset}" for offset, char in found[:limit])
    return f"{len(found)} forbidden character(s): {shown}"
