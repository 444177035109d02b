# pyright: standard
# Checked at pyright's standard level, not strict: the escape helpers come from mdformat's
# private `_util` module, which has no type information for pyright's strict mode.
"""mdformat's renderer of a text token, with the same output at a fraction of the cost.

mdformat 1.0.0 escapes character references with `pattern.sub(r"\\\\\\g<0>", text)` on a
pattern that lists every HTML5 entity name (16 KB). A template replacement makes `re` look
the pattern up in a cache keyed by the pattern object, and hashing that pattern hashes its
compiled code: ~30 µs per text token, whether the text holds an `&` or not, which was a
fifth of the whole conversion of a small document. Here the same pattern is applied with a
function replacement, and only to text that holds an `&` (every match starts with one).

Everything else is mdformat 1.0.0's `renderer._context.text`, step for step (the version is
pinned in pyproject.toml; the golden and identity tests compare the output byte for byte).
"""

import re

from mdformat.renderer import WRAP_POINT, RenderContext, RenderTreeNode
from mdformat.renderer._util import (  # pyright: ignore[reportPrivateUsage]
    escape_asterisk_emphasis,
    escape_less_than_sign,
    escape_square_brackets,
    escape_underscore_emphasis,
    re_char_reference,
)

_SPACES = re.compile(" {2,}")
_WHITESPACE_RUN = re.compile(r"[ \t\n]+")


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
