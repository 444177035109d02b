r"""Character rules (1-3): surrogates, controls and noncharacters, NFC.

They apply everywhere, code included: what they remove cannot be stored or dumped safely
(NUL) or is not text at all (lone surrogates, C0/C1 controls, noncharacters).
"""

import re
import unicodedata
from typing import Final

_ASTRAL_NONCHARACTERS: Final = "".join(
    f"\\U{plane:04x}fffe\\U{plane:04x}ffff" for plane in range(1, 0x11)
)
_NONCHARACTERS: Final = "\ufdd0-\ufdef\ufffe\uffff" + _ASTRAL_NONCHARACTERS
FORBIDDEN_CHARACTERS: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff" + _NONCHARACTERS + "]"
)
"""Matches any character that sanitized text may not contain."""

_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")
# Astral ranges make a character class several times slower to scan, so rule 2 scans the
# BMP class and looks for astral noncharacters only in text that has astral characters.
_RULE2_BMP_RE: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufdd0-\ufdef\ufffe\uffff]"
)
_ASTRAL_RE: Final = re.compile("[\U00010000-\U0010ffff]")
_ASTRAL_NONCHARACTER_RE: Final = re.compile("[" + _ASTRAL_NONCHARACTERS + "]")
_CONTROL_RE: Final = re.compile("[\x01-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_BMP_NONCHARACTER_RE: Final = re.compile("[\ufdd0-\ufdef\ufffe\uffff]")


def add(counts: dict[str, int], key: str, value: int) -> None:
    """Adds `value` to the count of `key` (nothing for 0)."""
    if value:
        counts[key] = counts.get(key, 0) + value


def repair_surrogates(text: str, counts: dict[str, int]) -> str:
    """Rule 1: join surrogate pairs, replace lone surrogates by U+FFFD."""
    if not _SURROGATE_RE.search(text):
        return text
    # UTF-16 with surrogatepass joins well-formed pairs; "replace" turns each lone one
    # into exactly one U+FFFD, so lengths and U+FFFD counts give both numbers.
    repaired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    add(counts, "surrogate_pairs_joined", len(text) - len(repaired))
    add(counts, "surrogates_repaired", repaired.count("\ufffd") - text.count("\ufffd"))
    return repaired


def remove_controls(text: str, counts: dict[str, int], ascii_only: bool) -> str:
    """Rule 2: newlines normalized; NUL, other controls and noncharacters removed."""
    astral = not ascii_only and bool(_ASTRAL_RE.search(text))
    if not _RULE2_BMP_RE.search(text) and not (astral and _ASTRAL_NONCHARACTER_RE.search(text)):
        return text
    newlines = text.count("\r\n")
    text = text.replace("\r\n", "\n")
    for separator in ("\r", "\u2028", "\u2029"):
        found = text.count(separator)
        if found:
            newlines += found
            text = text.replace(separator, "\n")
    add(counts, "newlines_normalized", newlines)
    nul = text.count("\x00")
    if nul:
        add(counts, "nul_removed", nul)
        text = text.replace("\x00", "")
    text, removed = _CONTROL_RE.subn("", text)
    add(counts, "controls_removed", removed)
    text, removed = _BMP_NONCHARACTER_RE.subn("", text)
    if astral:
        text, more = _ASTRAL_NONCHARACTER_RE.subn("", text)
        removed += more
    add(counts, "noncharacters_removed", removed)
    return text


def nfc(text: str, counts: dict[str, int]) -> str:
    """Rule 3: Unicode NFC."""
    if unicodedata.is_normalized("NFC", text):
        return text
    counts["nfc_changed"] = 1
    return unicodedata.normalize("NFC", text)
