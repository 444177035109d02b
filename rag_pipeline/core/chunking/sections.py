"""Sections: the parents, cut at the configured heading levels, tiny ones merged away.

Folding exists for sections that are no useful parent on their own: an H1 holding only its
title before its first H2, an empty heading, a run of headings with nothing under them. A
section with a titled heading of its own and text under it is never folded, however short
("## Cancelling a pickup" and one sentence): folded, its text would be found under the
previous section's title and heading path, and neither the hit nor the keyword leg's title
rules would see its own heading. Text with no heading of its own (what precedes the first
heading, text under an empty heading) still folds when it is smaller than
`min_section_tokens`: it has no title to lose. The price: a page of many one-line entries under
headings of their own (a glossary) is one section and chunk per entry where it was packed
into a few chunks, so `max_chunks` is reached sooner (at 2,000 entries by default).
"""

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from rag_pipeline.core.chunking.blocks import plain_inline
from rag_pipeline.core.chunking.text import DocumentText, Piece

# Markup an HTML block may hold without any text a reader sees.
_HTML_MARKUP = re.compile(r"<!--.*?-->|<[^>]*>", re.DOTALL)


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


def keeps_its_title(draft: SectionDraft, text: DocumentText) -> bool:
    """Whether a section has a titled heading of its own and text under it (never folded).

    Text is a block other than a heading with a letter or digit a reader sees: a rule, an
    image without alt text or an HTML comment under a heading is no text of its own.
    """
    if draft.level == 0 or not draft.title or not draft.blocks[0].heading:
        return False
    for block in draft.blocks[1:]:
        if block.heading:
            continue
        source = text.doc[block.start : block.end]
        if block.kind == "paragraph":
            source = plain_inline(source, text.deadline)
        elif block.kind == "html_block":
            source = _HTML_MARKUP.sub("", source)
        if any(char.isalnum() for char in source):
            return True
    return False


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
    """Fold the sections `tiny` says are too small to be useful parents into a neighbour.

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
