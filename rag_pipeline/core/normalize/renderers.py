# pyright: standard
# Checked at pyright's standard level, not strict: the escape helpers come from mdformat's
# private `_util` module, which has no type information for pyright's strict mode.
"""mdformat's renderers of text and paragraphs, with the same output at a fraction of the cost.

Both are mdformat 1.0.0's (`renderer._context.text` and `.paragraph`) step for step, for the
options `markdown.canonicalize` uses (no wrapping); the version is pinned in pyproject.toml,
and the golden tests compare the output byte for byte. What differs is only how:

- Character references are escaped with `pattern.sub(r"\\\\\\g<0>", text)` on a pattern that
  lists every HTML5 entity name (16 KB). A template replacement makes `re` look the template
  up in a cache keyed by the pattern object, and hashing that pattern hashes its compiled
  code: ~30 µs per text token, with or without an `&` in it, a fifth of the whole conversion
  of a small document. Here the same pattern is applied with a function replacement, and
  only to text that holds an `&` (every match starts with one).
- Without wrapping, mdformat's `_wrap` swaps every whitespace character of a paragraph for a
  placeholder and back again, with a Python callback per character; all it changes is that
  each run of wrap points becomes one space, which one regex substitution does.
"""

import re

from markdown_it.rules_block.html_block import HTML_SEQUENCES
from mdformat import codepoints
from mdformat.renderer import DEFAULT_RENDERERS, WRAP_POINT, RenderContext, RenderTreeNode
from mdformat.renderer._util import (  # pyright: ignore[reportPrivateUsage]
    decimalify_leading,
    decimalify_trailing,
    escape_asterisk_emphasis,
    escape_less_than_sign,
    escape_square_brackets,
    escape_underscore_emphasis,
    re_char_reference,
)

_SPACES = re.compile(" {2,}")
_WHITESPACE_RUN = re.compile(r"[ \t\n]+")
_WRAP_POINTS = re.compile(re.escape(WRAP_POINT) + "+")
_ATX_HEADING = re.compile(r"#{1,6}( |\t|$)")
_BULLET = re.compile(r"[-*+]( |\t|$)")
_ORDERED_PAREN = re.compile(r"[0-9]+\)( |\t|$)")
_ORDERED_DOT = re.compile(r"[0-9]+\.( |\t|$)")
_BREAKING_HTML = [opening for opening, _, can_break in HTML_SEQUENCES if can_break]


def _escaped(match: re.Match[str]) -> str:
    return "\\" + match.group()


def _in_paragraph(node: RenderTreeNode) -> bool:
    parent = node.parent
    while parent:
        if parent.type == "paragraph":
            return True
        parent = parent.parent
    return False


def render_text(node: RenderTreeNode, context: RenderContext) -> str:
    """Render a text token as mdformat does: escaped so that it reads back as the same text."""
    text = node.content.replace("\t", " ")
    if "  " in text:
        text = _SPACES.sub(" ", text)
    # The backslash first, or the escapes added below would be escaped again.
    text = text.replace("\\", "\\\\")
    text = escape_asterisk_emphasis(text)
    text = escape_underscore_emphasis(text)
    text = escape_square_brackets(text, context.env["used_refs"])
    if "<" in text:
        text = escape_less_than_sign(text)
    text = text.replace("`", "\\`")
    if "&" in text:
        text = re_char_reference().sub(_escaped, text)
    text = text.replace("\n\n", "&#10;&#10;")
    # A "!" just before a link would make it an image.
    next_sibling = node.next_sibling
    if text.endswith("!") and next_sibling and next_sibling.type == "link":
        text = text[:-1] + "\\!"
    if context.do_wrap and _in_paragraph(node):
        text = _WHITESPACE_RUN.sub(WRAP_POINT, text)
    return text


def _escape_line(line: str) -> str:
    """One line of a paragraph, escaped so that it cannot start another kind of block."""
    line = line.strip()
    if _ATX_HEADING.match(line) or line.startswith(">") or _BULLET.match(line):
        line = f"\\{line}"
    if _ORDERED_PAREN.match(line):
        line = line.replace(")", "\\)", 1)
    if _ORDERED_DOT.match(line):
        line = line.replace(".", "\\.", 1)
    # Three or more "-" (or "*", "_") would be a thematic break.
    space_removed = line.replace(" ", "").replace("\t", "")
    if len(space_removed) >= 3:
        if all(c == "*" for c in space_removed):
            line = line.replace("*", "\\*", 1)
        elif all(c == "-" for c in space_removed):
            line = line.replace("-", "\\-", 1)
        elif all(c == "_" for c in space_removed):
            line = line.replace("_", "\\_", 1)
    # Only "=" or "-" would underline a setext heading.
    stripped = line.strip(" \t")
    if all(c == "-" for c in stripped):
        line = line.replace("-", "\\-", 1)
    elif all(c == "=" for c in stripped):
        line = line.replace("=", "\\=", 1)
    # A line that could open an HTML block is indented so that it cannot.
    for opening in _BREAKING_HTML:
        if opening.search(line):
            return f"    {line}"
    return line


def render_paragraph(node: RenderTreeNode, context: RenderContext) -> str:
    """Render a paragraph as mdformat does without wrapping (other modes: mdformat itself)."""
    if context.options["mdformat"]["wrap"] != "no":
        return DEFAULT_RENDERERS["paragraph"](node, context)
    text = _WRAP_POINTS.sub(" ", node.children[0].render(context))
    # Whitespace at either end (written as a character reference) must stay one.
    text = decimalify_leading(codepoints.UNICODE_WHITESPACE, text)
    text = decimalify_trailing(codepoints.UNICODE_WHITESPACE, text)
    return "\n".join(_escape_line(line) for line in text.split("\n"))
