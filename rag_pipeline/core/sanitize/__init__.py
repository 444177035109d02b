r"""Sanitizing Markdown before it is stored and embedded (seed ADR-067, done right).

The seed's TextSanitizer URL-decoded whole documents and collapsed every run of spaces; both
corrupt real content (`50% off`, `a+b`, code indentation, aligned tables). Here every rule
is scoped: character-level repairs (rules 1-3, `characters`) apply everywhere, the
Markdown-aware rules (4-6: `zero_width`, `whitespace`, `links`) use markdown-it-py's block
token maps and its inline parse through the plugin API (`structure`), so code, tables and
prose are told apart by the same parser that renders them.

Rules, applied in this order:

1. Lone surrogates become U+FFFD; a surrogate pair left in a `str` (CESU-8,
   `surrogatepass`) is joined into its code point.
2. NUL and C0/C1 controls except `\n` and `\t` are removed; `\r\n`, `\r`, U+2028 and
   U+2029 become `\n`; the 66 Unicode noncharacters are removed.
3. Unicode NFC.
4. U+200B, U+2060 and U+FEFF are removed outside code (fenced and indented code blocks,
   HTML blocks, inline code spans). Decision: the joiners U+200C (ZWNJ) and U+200D (ZWJ)
   carry meaning in emoji ZWJ sequences and in Persian and Indic spelling, so a joiner is
   kept when both neighbours are non-ASCII, non-space characters and removed otherwise (a
   stray joiner at a word edge or next to ASCII is noise). Bidi marks (U+200E/U+200F) are
   text. A removal can change what is code (a leading U+FEFF hides a fence), so the rule
   re-parses until nothing kept in code moves out of it; after a few passes (adversarial
   input only) the characters are removed everywhere.
5. Trailing spaces and tabs are removed and runs of two or more blank lines become one
   (decision: the seed's `\n{3,}` -> `\n\n`). Lines of fenced, indented and HTML blocks and
   of GFM tables are kept byte for byte, and so is a line whose end lies inside a code
   span, raw HTML or link title. Decision: a hard break made of trailing spaces becomes a
   backslash hard break, so the break survives with no trailing space; it keeps its spaces
   where a backslash would change the meaning (after `\`, `*`, `_`, `~`, or in a link
   label). Blank lines after an empty list item are kept (markdown-it ends the list after
   two of them but not after one).
6. Percent-escapes inside link and image destinations and URL autolinks are decoded where
   the character is a visible non-ASCII one or a space and markdown-it's normalized href
   stays the same. Decision: a destination that gains a space is written in the pointy
   form `[x](<a b>)`, which CommonMark allows (an autolink cannot hold a space, so there
   `%20` stays); reserved ASCII (`%2F`, `%3F`, `%25` ...) stays encoded because decoding it
   would change the URL (or, for `%25`, not be idempotent). Prose, link titles, code and
   reference definitions are never percent-decoded.

Not done here, by decision (seed ADR-067's other rules): HTML entities are decoded by the
Markdown stage, whose converters (markdown-it, BeautifulSoup, the Editor.js reader) turn
every entity into its character before the canonical re-emit, so none reach this stage
outside code or escapes; bytes are decoded by the sources (the files source refuses invalid
UTF-8 with the offset, so a broken file fails visibly instead of gaining U+FFFD); and a
percent-encoded value is decoded only as a link target (rule 6), never as prose.

The result is NFC, free of `FORBIDDEN_CHARACTERS`, UTF-8 encodable, and a fixed point:
sanitizing it again changes nothing and reports no counts. Text that no Markdown-aware
rule would touch is never parsed (a few C-speed scans: about 0.1 s for 10 MB); otherwise
the block parse costs about 0.7 s per MB and only the inline tokens a rule needs are parsed.
"""

from dataclasses import dataclass, field
from typing import Final

from rag_pipeline.core.sanitize.characters import (
    FORBIDDEN_CHARACTERS,
    nfc,
    remove_controls,
    repair_surrogates,
)
from rag_pipeline.core.sanitize.structure import Document
from rag_pipeline.core.sanitize.whitespace import (
    needs_link_rule,
    needs_whitespace_rule,
    normalize_whitespace_and_links,
)
from rag_pipeline.core.sanitize.zero_width import ZERO_WIDTH_RE, remove_zero_width

__all__ = [
    "FORBIDDEN_CHARACTERS",
    "SANITIZER_VERSION",
    "SanitizeResult",
    "find_forbidden",
    "sanitize_text",
]

SANITIZER_VERSION: Final = "2026.11.1"


@dataclass(frozen=True)
class SanitizeResult:
    """Sanitized text and how often each rule changed it.

    Attributes:
        text: The sanitized text.
        counts: Changes per rule, only non-zero entries. Keys: `surrogates_repaired`,
            `surrogate_pairs_joined`, `nul_removed`, `controls_removed`,
            `newlines_normalized`, `noncharacters_removed`, `nfc_changed` (0/1),
            `zero_width_removed`, `trailing_spaces_removed` (lines),
            `hard_breaks_normalized`, `blank_lines_collapsed`, `percent_decoded` (link
            targets).
    """

    text: str
    counts: dict[str, int] = field(default_factory=lambda: {})


def sanitize_text(text: str) -> SanitizeResult:
    """Sanitizes Markdown for storage in PostgreSQL and for embedding.

    Args:
        text: Markdown; may hold lone surrogates, controls and any Unicode.

    Returns:
        The sanitized text and the per-rule counts (see the module docstring).
    """
    counts: dict[str, int] = {}
    # Every check below is a C-speed scan; Markdown is parsed only when a rule needs it.
    ascii_only = text.isascii()
    if not ascii_only:
        text = repair_surrogates(text, counts)
    text = remove_controls(text, counts, ascii_only)
    if not ascii_only:
        text = nfc(text, counts)
        if ZERO_WIDTH_RE.search(text):
            text = remove_zero_width(text, counts)
    if needs_whitespace_rule(text) or needs_link_rule(text):
        text = normalize_whitespace_and_links(Document(text), counts)
    if counts.get("percent_decoded"):
        text = nfc(text, counts)
    return SanitizeResult(text, {key: value for key, value in counts.items() if value})


def find_forbidden(text: str) -> list[tuple[int, str]]:
    """Lists every forbidden character of `text` for an error message.

    Args:
        text: Text that should have been sanitized.

    Returns:
        `(offset, repr(character))` for each match of `FORBIDDEN_CHARACTERS`.
    """
    return [(match.start(), repr(match.group())) for match in FORBIDDEN_CHARACTERS.finditer(text)]
