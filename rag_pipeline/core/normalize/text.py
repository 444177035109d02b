"""Plain text → Markdown: paragraphs kept, nothing in the text read as Markdown."""

from rag_pipeline.core.normalize.inline import escape_markdown


def text_to_markdown(text: str) -> str:
    """Convert plain text to (not yet canonical) Markdown.

    Blank lines separate paragraphs; the lines of a paragraph stay together. Every Markdown
    special character is escaped, and each line is trimmed, because leading spaces would make
    an indented code block and two trailing spaces a hard line break.

    Args:
        text: Plain text with any line endings.

    Returns:
        Markdown whose rendering shows the same words, paragraph by paragraph.
    """
    paragraphs: list[list[str]] = [[]]
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        stripped = line.strip()
        if stripped:
            paragraphs[-1].append(escape_markdown(stripped))
        elif paragraphs[-1]:
            paragraphs.append([])
    return "\n\n".join("\n".join(lines) for lines in paragraphs if lines)
