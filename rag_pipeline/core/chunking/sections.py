"""Sections: the parents, cut at the configured heading levels, tiny ones merged away."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from rag_pipeline.core.chunking.text import Piece


@dataclass(frozen=True)
class SectionDraft:
    """A section before it is chunked: its heading, enclosing headings and blocks."""

    level: int
    title: str
    path: tuple[str, ...]
    blocks: tuple[Piece, ...]
    tokens: int


def section_drafts(
    blocks: Sequence[Piece],
    headings: dict[int, tuple[int, str]],
    *,
    title: str,
    levels: tuple[int, ...],
    tiny: Callable[[SectionDraft], bool],
) -> list[SectionDraft]:
    """Cut the blocks into sections at headings of `levels`, then merge the `tiny` ones.

    The text before the first such heading is a section named `title`.
    """
    drafts: list[SectionDraft] = []
    stack: list[tuple[int, str]] = []
    level, path = 0, ()
    current: list[Piece] = []
    for block in blocks:
        heading = headings.get(block.block)
        if heading is not None and heading[0] in levels:
            if current:
                drafts.append(_draft(level, title, path, current))
            level, title = heading
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append(heading)
            path = tuple(text for _, text in stack)
            current = []
        current.append(block)
    if current:
        drafts.append(_draft(level, title, path, current))
    return merge_tiny(drafts, tiny)


def _draft(level: int, title: str, path: tuple[str, ...], blocks: list[Piece]) -> SectionDraft:
    return SectionDraft(level, title, path, tuple(blocks), sum(b.tokens for b in blocks))


def _siblings(a: SectionDraft, b: SectionDraft) -> bool:
    return a.level == b.level and a.path[:-1] == b.path[:-1]


def _child(parent: SectionDraft, other: SectionDraft) -> bool:
    depth = len(parent.path)
    return other.level > parent.level and other.path[:depth] == parent.path


def merge_tiny(
    drafts: list[SectionDraft], tiny: Callable[[SectionDraft], bool]
) -> list[SectionDraft]:
    """Fold sections too small to be useful parents into a neighbour.

    Preferred: the previous sibling (same level, same enclosing headings); then the next
    sibling; then, for a parent with next to no text of its own (an H1 holding only its
    title), its first child, whose heading path already names it.
    """
    # Merged runs are collected as lists and frozen once at the end: absorbing one draft
    # at a time into a growing tuple made 500,000 empty headings take minutes.
    backward: list[tuple[SectionDraft, list[SectionDraft]]] = []
    for draft in drafts:
        if backward and tiny(draft) and _siblings(backward[-1][0], draft):
            head, run = backward[-1]
            run.append(draft)
            backward[-1] = (replace(head, tokens=head.tokens + draft.tokens), run)
        else:
            backward.append((draft, [draft]))
    # Right to left, so that a run of tiny sections collects into the first big one.
    merged: list[tuple[SectionDraft, list[list[SectionDraft]]]] = []
    for here, run in reversed(backward):
        if merged:
            after, runs = merged[-1]
            if tiny(here) and (_siblings(here, after) or _child(here, after)):
                runs.append(run)
                merged[-1] = (replace(after, tokens=after.tokens + here.tokens), runs)
                continue
        merged.append((here, [run]))
    out: list[SectionDraft] = []
    for head, runs in reversed(merged):
        blocks = tuple(b for run in reversed(runs) for d in run for b in d.blocks)
        out.append(replace(head, blocks=blocks))
    return out
