"""Rule 6: percent-escapes in link and image destinations and URL autolinks decoded.

Only where the character is a visible non-ASCII one or a space and markdown-it's normalized
href stays the same; see the package docstring for the decisions.
"""

import re
import unicodedata
from collections.abc import Callable
from typing import Final

from markdown_it import MarkdownIt

from rag_pipeline.core.sanitize.structure import MD, Inline, Target, document_span

PERCENT_ESCAPE_RE: Final = re.compile(r"%[0-9a-fA-F]{2}")
_PERCENT_RUN_RE: Final = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
# A full parser, to ask whether a decoded autolink body is still an autolink.
_AUTOLINK_CHECK: Final = MarkdownIt("commonmark")


def target_edit(
    inline: Inline, target: Target, html_before: bool
) -> tuple[int, int, int, str] | None:
    """`(document line, start, end, replacement)` for a destination worth decoding, or None."""
    content = inline.token.content
    raw = content[target.start : target.end]
    if not PERCENT_ESCAPE_RE.search(raw):
        return None
    span = document_span(inline, target.start, target.end)
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


def _is_autolink(body: str) -> bool:
    children = _AUTOLINK_CHECK.parseInline(f"<{body}>")[0].children or []
    return len(children) == 3 and children[0].markup == "autolink"


def _decoded_target(
    raw: str, target: Target, html_before: bool, before: str, after: str
) -> str | None:
    """The most readable rewrite of a destination that keeps its href, or None."""
    if target.autolink:
        decoded, count = _decode_percent(raw, _is_visible_non_ascii)
        href = _canonical_href(MD.normalizeLink(raw))
        if (
            count
            and _is_autolink(decoded)
            and _canonical_href(MD.normalizeLink(decoded)) == href
            and unicodedata.is_normalized("NFC", before + decoded + after)
        ):
            return decoded
        return None

    pointy = raw.startswith("<")
    inner = raw[1:-1] if pointy else raw
    href = _canonical_href(MD.normalizeLink(MD.utils.unescapeAll(inner)))
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
        parsed = MD.helpers.parseLinkDestination(candidate, 0, len(candidate))
        if (
            parsed.ok
            and parsed.pos == len(candidate)
            and _canonical_href(MD.normalizeLink(parsed.str)) == href
            and unicodedata.is_normalized("NFC", before + candidate + after)
        ):
            return candidate
    return None


def _canonical_href(href: str) -> str:
    # %c3%a9 and %C3%A9 are the same URL; mdurl keeps the case it is given.
    return PERCENT_ESCAPE_RE.sub(lambda match: match.group().upper(), href)


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
