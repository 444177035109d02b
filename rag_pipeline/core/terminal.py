"""Text from a remote server made safe to print on a terminal.

A terminal obeys escape sequences in what it prints: OSC 52 writes the clipboard, OSC 0 sets
the window title, CSI 2J clears the screen, ESC c resets it, and a bare carriage return lets
a line overwrite the one a person just read. Text from an LLM endpoint (or anything else a
server says) goes through here before it is printed: whole escape sequences (ECMA-48 CSI,
OSC, DCS, SOS, PM, APC and two-character escapes, in their 7-bit and 8-bit forms) are
removed, then every other C0 and C1 control character and DEL except newline and tab, and
the Unicode direction controls (U+061C, U+200E/F, U+202A–U+202E, U+2066–U+2069): a
right-to-left override makes printed text read otherwise than it is (issue 49).

`ControlFilter` does the same for a stream whose pieces may split a sequence in two: an
unfinished sequence at the end of a piece waits for the next one (at most `HOLD_CHARS`
characters; longer, it is taken as no sequence and only its control characters go).
"""

import re

HOLD_CHARS = 4096

_ST = r"(?:\x1b\\|\x9c|\x07)"  # string terminator; BEL ends OSC in xterm's dialect
_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI … final byte
    rf"|(?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f])[^\x07\x1b\x9c]*{_ST}"  # OSC, DCS, SOS, PM, APC
    # Two-character escapes (ESC c, ESC 7 …) with intermediates; not the introducers of the
    # string sequences above (ESC [ ] P X ^ _), whose unfinished forms must wait for the rest.
    r"|\x1b[ -/]*[0-OQ-WYZ\\`-~]"
)
_CONTROLS = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0, DEL, C1
    r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"  # direction marks, embeddings, isolates
)
# Where a sequence may start but is not finished yet.
_INTRODUCER = re.compile(r"[\x1b\x9b\x9d\x90\x98\x9e\x9f]")


def strip_controls(text: str) -> str:
    """`text` without escape sequences or control characters other than newline and tab."""
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))


class ControlFilter:
    """`strip_controls` for text arriving in pieces: `feed` each piece, then `flush`."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, piece: str) -> str:
        """The printable text so far; an unfinished sequence at the end is held back."""
        text = _SEQUENCES.sub("", self._pending + piece)
        self._pending = ""
        start = max((m.start() for m in _INTRODUCER.finditer(text)), default=-1)
        if start >= 0 and len(text) - start <= HOLD_CHARS:
            self._pending = text[start:]
            text = text[:start]
        return _CONTROLS.sub("", text)

    def flush(self) -> str:
        """Whatever was held back, without its control characters (the stream has ended)."""
        text, self._pending = self._pending, ""
        return strip_controls(text)
