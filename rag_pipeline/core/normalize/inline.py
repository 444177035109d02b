"""Small text-level helpers shared by the converters: HTML fragments, escapes, code markup."""

import string
import warnings

from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning, Tag
from bs4.element import NavigableString, PageElement

# CommonMark lets a backslash escape any ASCII punctuation character, and only those.
_ASCII_PUNCTUATION = frozenset(string.punctuation)


def parse_html(html: str) -> BeautifulSoup:
    """Parse HTML with the standard library's parser (lenient, as browsers are)."""
    if " " in html:
        return BeautifulSoup(html, "html.parser")
    # bs4 warns when space-free markup looks like a URL or a file name; for us a field that
    # holds just a URL is content, not a mistaken path.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
        return BeautifulSoup(html, "html.parser")


def _is_plain(html: str) -> bool:
    # Without a tag or an entity, a fragment's text is the fragment itself.
    return "<" not in html and "&" not in html


def parse_fragment(html: str) -> list[PageElement]:
    """Parse an HTML fragment (e.g. an Editor.js text field) into detached nodes.

    Each fragment is parsed on its own, so an unclosed tag in one field cannot swallow the
    blocks that follow it.

    Args:
        html: An HTML fragment; plain text is a valid fragment.

    Returns:
        The fragment's top-level nodes, detached from the parser's document.
    """
    if not html:
        return []
    if _is_plain(html):
        return [NavigableString(html)]
    soup = parse_html(html)
    return [node.extract() for node in list(soup.contents)]


# Elements whose boundaries separate words even without whitespace around them.
_WORD_BREAKING_TAGS = frozenset(
    {"br", "p", "div", "li", "tr", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote"}
)


def fragment_text(html: str) -> str:
    """The visible text of an HTML fragment on one line, whitespace runs collapsed.

    Used where Markdown allows no markup, such as an image's alt text.
    """
    if _is_plain(html):
        return collapse_whitespace(html)
    parts: list[str] = []
    for node in parse_html(html).descendants:
        if isinstance(node, Tag):
            if node.name in _WORD_BREAKING_TAGS:
                parts.append(" ")
        elif type(node) is NavigableString:
            parts.append(str(node))
    return collapse_whitespace("".join(parts))


def collapse_whitespace(text: str) -> str:
    """Replace every run of whitespace (including newlines) with one space and trim."""
    return " ".join(text.split())


def escape_markdown(text: str) -> str:
    """Backslash-escape every ASCII punctuation character of plain text.

    Over-escaping is deliberate: it is always correct, and the canonical re-emit removes the
    escapes that are not needed.
    """
    return "".join("\\" + char if char in _ASCII_PUNCTUATION else char for char in text)


def escape_table_pipes(cell: str) -> str:
    """Escape every `|` of a table cell's Markdown that is not escaped yet.

    GFM splits cells on unescaped pipes even inside code spans, so every pipe needs a
    backslash; one already preceded by an odd number of backslashes has one.
    """
    out: list[str] = []
    backslashes = 0
    for char in cell:
        if char == "|" and backslashes % 2 == 0:
            out.append("\\")
        out.append(char)
        backslashes = backslashes + 1 if char == "\\" else 0
    return "".join(out)


def _longest_run(text: str, char: str) -> int:
    longest = current = 0
    for c in text:
        current = current + 1 if c == char else 0
        longest = max(longest, current)
    return longest


def code_span(text: str) -> str:
    """Markdown inline code for `text`, with a delimiter longer than any backtick run in it."""
    if not text.strip():
        return ""
    run = _longest_run(text, "`")
    delimiter = "`" * (run + 1)
    if run or text.startswith("`") or text.endswith("`"):
        return f"{delimiter} {text} {delimiter}"
    return f"{delimiter}{text}{delimiter}"


def code_fence(code: str, language: str = "") -> str:
    """A fenced code block whose content is `code` byte for byte (plus a final newline).

    Args:
        code: The code, kept as is: indentation, tabs and trailing spaces included.
        language: The info string; dropped if it could not be one (backticks, whitespace).

    Returns:
        The fence surrounded by blank lines, or "" if `code` is blank.
    """
    if not code.strip():
        return ""
    if not code.endswith("\n"):
        code += "\n"
    if "`" in language or len(language.split()) != 1:
        language = ""
    fence = "`" * max(3, _longest_run(code, "`") + 1)
    return f"\n\n{fence}{language}\n{code}{fence}\n\n"


def preformatted_text(element: Tag) -> str:
    """The text of a `<pre>`-like element exactly as displayed: markup dropped, `<br>` → newline.

    Comments, doctypes and processing instructions are not text. As browsers do, one newline
    right after the opening `<pre>` tag is dropped.
    """
    parts: list[str] = []
    for node in element.descendants:
        if isinstance(node, Tag):
            if node.name == "br":
                parts.append("\n")
        elif type(node) is NavigableString:
            parts.append(str(node))
    text = "".join(parts)
    first = element.contents[0] if element.contents else None
    if element.name == "pre" and isinstance(first, NavigableString) and text.startswith("\n"):
        text = text[1:]
    return text
