"""The diff of two document versions: sections matched by heading path, chunk origins."""

import pytest

from rag_pipeline.core.version_diff import (
    MAX_DIFF_LINES,
    ChunkSnapshot,
    SectionSnapshot,
    VersionSnapshot,
    diff_versions,
)

pytestmark = pytest.mark.unit


def version(
    number: int,
    title: str,
    sections: list[tuple[tuple[str, ...], str]],
    chunks: list[ChunkSnapshot],
) -> VersionSnapshot:
    """A version whose body is the sections' texts one after the other."""
    body, snapshots = "", []
    for path, text in sections:
        start = len(body)
        body += text
        snapshots.append(SectionSnapshot(path[-1], path, start, len(body), f"sha:{text}"))
    return VersionSnapshot(number, body, snapshots, chunks, title)


def test_added_removed_and_changed_sections_with_their_markdown() -> None:
    old = version(
        1, "Guide", [(("Guide", "A"), "a\n"), (("Guide", "B"), "b\n"), (("Guide", "C"), "c\n")], []
    )
    new = version(
        2, "Guide", [(("Guide", "A"), "a\n"), (("Guide", "B"), "b2\n"), (("Guide", "D"), "d\n")], []
    )
    diff = diff_versions(old, new)
    assert [(s.change, s.name) for s in diff.sections] == [
        ("changed", "Guide › B"),
        ("added", "Guide › D"),
        ("removed", "Guide › C"),
    ]
    changed = diff.sections[0].diff
    assert "-b\n" in changed
    assert "+b2\n" in changed
    assert "v1: Guide › B" in changed
    assert "+d\n" in diff.sections[1].diff


def test_a_renamed_document_keeps_its_opening_section_and_repeated_headings_pair_in_order() -> None:
    old = version(1, "Old", [(("Old",), "intro\n"), (("Notes",), "x\n"), (("Notes",), "y\n")], [])
    new = version(2, "New", [(("New",), "intro\n"), (("Notes",), "x\n"), (("Notes",), "y2\n")], [])
    diff = diff_versions(old, new)
    assert [(s.change, s.name) for s in diff.sections] == [("changed", "Notes")]
    assert "+y2" in diff.sections[0].diff


def test_chunks_unchanged_reembedded_reused_and_removed() -> None:
    old = version(1, "T", [], [ChunkSnapshot("a", True), ChunkSnapshot("b", True)])
    new = version(
        2,
        "T",
        [],
        [ChunkSnapshot("a", False), ChunkSnapshot("c", True), ChunkSnapshot("d", False)],
    )
    diff = diff_versions(old, new)
    assert (diff.chunks_unchanged, diff.chunks_reembedded, diff.chunks_reused) == (1, 1, 1)
    assert diff.chunks_removed == 1


def test_a_small_change_in_a_long_section_is_a_positional_diff_numbered_in_the_whole() -> None:
    lines = [f"line {n}\n" for n in range(5000)]
    edited = [*lines[:4000], "a new line\n", *lines[4001:]]
    old = version(1, "T", [(("T", "S"), "".join(lines))], [])
    new = version(2, "T", [(("T", "S"), "".join(edited))], [])
    (change,) = diff_versions(old, new).sections
    assert "@@ -3998,7 +3998,7 @@\n" in change.diff
    assert "-line 4000\n+a new line\n" in change.diff


def test_a_20000_line_reordering_is_shown_by_content_with_the_reason() -> None:
    # Issue 49, item 9: difflib on 10,000 reordered paragraphs (20,000 lines) took 31 s.
    paragraphs = [f"paragraph {n} of the section\n\n" for n in range(10_000)]
    moved = paragraphs[1::2] + paragraphs[::2] + ["a paragraph only the new one has\n"]
    old = version(1, "T", [(("T", "S"), "".join(paragraphs))], [])
    new = version(2, "T", [(("T", "S"), "".join(moved[:-2]) + moved[-1])], [])
    (change,) = diff_versions(old, new).sections
    assert f"more than {MAX_DIFF_LINES:,} lines differ" in change.diff
    # One paragraph's text and blank line went, one line came; the rest only moved.
    assert change.diff.splitlines()[3:] == [
        "-",
        f"-{paragraphs[-2].strip()}",
        "+a paragraph only the new one has",
    ]
