"""Content rules the asset checks enforce, as pure functions."""

from markdown_it import MarkdownIt

from rag_pipeline.core.sanitize import find_forbidden

# Editor.js structure in JSON syntax: if any of these reach the index, a BLK document was
# indexed as raw JSON instead of being converted.
EDITORJS_SYNTAX = ('"blocks"', '"type":', '"data"')
_PARSER = MarkdownIt("commonmark")


def editorjs_syntax_leaks(markdown: str) -> list[str]:
    """Editor.js JSON structure words found outside code blocks (where JSON may be quoted)."""
    if not any(word in markdown for word in EDITORJS_SYNTAX):
        return []  # the usual case: no need to parse
    prose: list[str] = []
    for token in _PARSER.parse(markdown):
        if token.type in ("fence", "code_block"):
            continue
        prose.append(token.content)
    text = "\n".join(prose)
    return [word for word in EDITORJS_SYNTAX if word in text]


def forbidden_characters(text: str, limit: int = 5) -> str | None:
    """A description of the first forbidden characters in sanitized text, or None."""
    found = find_forbidden(text)
    if not found:
        return None
    shown = ", ".join(f"{char} at {offset}" for offset, char in found[:limit])
    return f"{len(found)} forbidden character(s): {shown}"
