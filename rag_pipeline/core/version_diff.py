"""What changed between two versions of a document: sections and chunk vectors.

Sections are matched by their heading path (the n-th section with the same path matches the
n-th), not by id: a section id names its text, so an edited section gets a new id. A heading
that is the document's title matches the other version's title: a moved (renamed) wiki page
keeps its opening section. A matched
section whose text hash differs is changed, and its Markdown is shown as a unified diff of the
lines between their common beginning and end; past `MAX_DIFF_LINES` of those, the lines only
one side has, by content (a positional diff of that much is quadratic).
A chunk of the newer version is `unchanged` when the older version had the same text (its
vector was reused), else `re-embedded` when that version's run computed its vector, else
`reused` from the embedding cache (another document or an older version had the same text).
"""

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

SECTION_PATH_SEPARATOR = " › "
# Past this many lines differing (both sides), a section's change is shown by content.
MAX_DIFF_LINES = 2000
_HUNK = re.compile(r"([-+])(\d+)")


@dataclass(frozen=True)
class SectionSnapshot:
    """A section of one version: where it is in the body, and its text's hash."""

    title: str
    heading_path: tuple[str, ...]
    start_char: int
    end_char: int
    sha256: str

    @property
    def name(self) -> str:
        """How a person names the section: its heading path."""
        return SECTION_PATH_SEPARATOR.join(self.heading_path) or self.title or "(untitled)"


@dataclass(frozen=True)
class ChunkSnapshot:
    """A chunk of one version: its text's hash and whether that version's run embedded it."""

    sha256: str
    computed: bool | None


@dataclass(frozen=True)
class VersionSnapshot:
    """What a diff needs of a version."""

    version: int
    body: str
    sections: Sequence[SectionSnapshot]
    chunks: Sequence[ChunkSnapshot]
    title: str = ""


@dataclass(frozen=True)
class SectionChange:
    """A section added, removed or changed, with the unified diff of its Markdown."""

    change: str
    name: str
    diff: str = ""


@dataclass(frozen=True)
class VersionDiff:
    """The differences from `old` to `new`."""

    old: int
    new: int
    sections: list[SectionChange] = field(default_factory=lambda: [])
    chunks_unchanged: int = 0
    chunks_reembedded: int = 0
    chunks_reused: int = 0
    chunks_removed: int = 0


_TITLE = "\x00title"  # stands for the document's title in a section's key


def _keyed(version: VersionSnapshot) -> dict[tuple[str, int], SectionSnapshot]:
    seen: dict[str, int] = {}
    keyed: dict[tuple[str, int], SectionSnapshot] = {}
    for section in version.sections:
        path = section.heading_path or (section.title,)
        name = SECTION_PATH_SEPARATOR.join(_TITLE if p == version.title else p for p in path)
        n = seen.get(name, 0)
        seen[name] = n + 1
        keyed[(name, n)] = section
    return keyed


def _text(version: VersionSnapshot, section: SectionSnapshot) -> str:
    return version.body[section.start_char : section.end_char]


def _unified(old: str, new: str, name: str, old_version: int, new_version: int) -> str:
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    head = _common_prefix(a, b)
    tail = _common_prefix(a[head:][::-1], b[head:][::-1])
    # difflib is quadratic in the lines it compares (10,000 reordered paragraphs took 31 s;
    # issue 49): it sees only what differs, with its 3 lines of context.
    low, a_high, b_high = max(0, head - 3), min(len(a), len(a) - tail + 3), len(b) - tail + 3
    b_high = min(len(b), b_high)
    fromfile, tofile = f"v{old_version}: {name}", f"v{new_version}: {name}"
    if (a_high - low) + (b_high - low) > MAX_DIFF_LINES:
        lines = _by_content(a[head : len(a) - tail], b[head : len(b) - tail], fromfile, tofile)
    else:
        hunks = difflib.unified_diff(a[low:a_high], b[low:b_high], fromfile, tofile)
        lines = (_shifted(line, low) for line in hunks)
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _shifted(line: str, offset: int) -> str:
    """A hunk header of a diff of lines from `offset` on, numbered as in the whole text."""
    if not offset or not line.startswith("@@ "):
        return line
    return _HUNK.sub(lambda m: f"{m[1]}{int(m[2]) + offset}", line)


def _by_content(a: list[str], b: list[str], fromfile: str, tofile: str) -> list[str]:
    """The lines only one side has (counted, in their order): linear, for a change too large
    for a positional diff."""
    left, right = Counter(a), Counter(b)
    removed, added = left - right, right - left
    note = (
        f"@@ more than {MAX_DIFF_LINES:,} lines differ: the lines removed and added, by content "
        "(moved lines are not shown) @@\n"
    )
    lines = [f"--- {fromfile}\n", f"+++ {tofile}\n", note]
    for sign, side, counts in (("-", a, removed), ("+", b, added)):
        for line in side:
            if counts[line] > 0:
                counts[line] -= 1
                lines.append(sign + line)
    return lines


def diff_versions(old: VersionSnapshot, new: VersionSnapshot) -> VersionDiff:
    """Sections added, removed and changed from `old` to `new`, and where new vectors came from."""
    before, after = _keyed(old), _keyed(new)
    changes: list[SectionChange] = []
    for key, section in after.items():
        previous = before.get(key)
        if previous is None:
            empty = _unified("", _text(new, section), section.name, old.version, new.version)
            changes.append(SectionChange("added", section.name, empty))
        elif previous.sha256 != section.sha256:
            text = _unified(
                _text(old, previous), _text(new, section), section.name, old.version, new.version
            )
            changes.append(SectionChange("changed", section.name, text))
    for key, section in before.items():
        if key not in after:
            gone = _unified(_text(old, section), "", section.name, old.version, new.version)
            changes.append(SectionChange("removed", section.name, gone))
    old_shas = {c.sha256 for c in old.chunks}
    new_shas = {c.sha256 for c in new.chunks}
    unchanged = [c for c in new.chunks if c.sha256 in old_shas]
    fresh = [c for c in new.chunks if c.sha256 not in old_shas]
    return VersionDiff(
        old=old.version,
        new=new.version,
        sections=changes,
        chunks_unchanged=len(unchanged),
        chunks_reembedded=sum(1 for c in fresh if c.computed),
        chunks_reused=sum(1 for c in fresh if not c.computed),
        chunks_removed=len(old_shas - new_shas),
    )
