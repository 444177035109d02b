"""Block parsing: the document as a run of top-level blocks with their kinds and headings.

The markdown-it token stream gives each block its lines; the block's text is cut from the
document by those lines. Text no block token covers (link reference definitions) is kept
as a text block, and YAML front matter as one opaque block.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

from markdown_it import MarkdownIt
from markdown_it.token import Token

from rag_pipeline.core.chunking.text import NEWLINE, DocumentText, Piece
from rag_pipeline.core.frontmatter import front_matter_bounds
from rag_pipeline.core.time_budget import Deadline, watch_parser

BLOCK_KINDS = {
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "blockquote_open": "blockquote",
    "paragraph_open": "paragraph",
    "heading_open": "heading",
    "table_open": "table",
    "fence": "fence",
    "code_block": "code_block",
    "html_block": "html_block",
    "hr": "hr",
}
CONTAINERS = ("bullet_list_open", "ordered_list_open", "list_item_open", "blockquote_open")


@cache
def _block_parser() -> MarkdownIt:
    # Inline parsing is a third of the parse time and only heading titles need it.
    return watch_parser(MarkdownIt("commonmark").enable("table").disable("inline"))


@cache
def _inline_parser() -> MarkdownIt:
    return watch_parser(MarkdownIt("commonmark"))


@dataclass
class ParsedBlocks:
    """The block token stream, the top-level blocks and the headings among them.

    Attributes:
        tokens: markdown-it's block tokens (inline content not parsed).
        blocks: The top-level blocks in document order; `Piece.block` is the index here.
        headings: Block index of each heading -> (level, plain title).
    """

    tokens: list[Token] = field(default_factory=lambda: [])
    blocks: list[Piece] = field(default_factory=lambda: [])
    headings: dict[int, tuple[int, str]] = field(default_factory=lambda: {})

    def close_of(self, index: int) -> int:
        """The index of the token closing the one at `index` (itself if it is not nested)."""
        tokens = self.tokens
        tok = tokens[index]
        if tok.nesting == 0:
            return index
        j = index + 1
        while not (tokens[j].level == tok.level and tokens[j].nesting == -1):
            j += 1
        return j

    def children(self, open_index: int, close_index: int) -> list[tuple[int, int]]:
        """The (open, close) token indexes of the block children of a container."""
        tokens = self.tokens
        level = tokens[open_index].level + 1
        children: list[tuple[int, int]] = []
        j = open_index + 1
        while j < close_index:
            tok = tokens[j]
            if tok.level == level and tok.nesting >= 0 and tok.type != "inline" and tok.map:
                end = self.close_of(j)
                children.append((j, end))
                j = end + 1
            else:
                j += 1
        return children


def parse_blocks(text: DocumentText) -> ParsedBlocks:
    """Parse a document into its top-level blocks."""
    return _BlockParser(text).parse()


class _BlockParser:
    def __init__(self, text: DocumentText) -> None:
        self._text = text
        self._parsed = ParsedBlocks()

    def parse(self) -> ParsedBlocks:
        text, parsed = self._text, self._parsed
        doc = text.doc
        parse_text = doc
        prev_end = 0
        front = front_matter_bounds(doc)
        if front is not None:
            # YAML front matter would parse as a rule plus a setext heading; it is kept as one
            # opaque block, and blanked for the parser so that line numbers stay the same.
            end = front[0] - 1 if doc[front[0] - 1] == "\r" else front[0]
            newlines = len(NEWLINE.findall(doc, 0, end))
            parse_text = "\n" * newlines + doc[end:]
            self._add_block(0, end, "front_matter", "lines", None)
            prev_end = end
        tokens = _block_parser().parse(parse_text, text.deadline.env())
        parsed.tokens = tokens
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if tok.level != 0 or tok.nesting < 0 or tok.map is None:
                i += 1
                continue
            close = parsed.close_of(i)
            start, end = text.map_span(tok.map)
            start = max(start, prev_end)
            self._add_gap(prev_end, start)
            if end > start:
                kind = BLOCK_KINDS.get(tok.type, "text")
                index = self._add_block(start, end, kind, "node", (i, close))
                if tok.type == "heading_open":
                    level = int(tok.tag[1:])
                    title = plain_inline(tokens[i + 1].content, text.deadline)
                    parsed.headings[index] = (level, title)
                prev_end = end
            i = close + 1
        self._add_gap(prev_end, len(doc))
        return parsed

    def _add_block(
        self, start: int, end: int, kind: str, split_as: str, node: tuple[int, int] | None
    ) -> int:
        end = self._text.trim_end(start, end)
        blocks = self._parsed.blocks
        index = len(blocks)
        tokens = self._text.span_tokens(start, end)
        heading = kind == "heading"
        blocks.append(Piece(start, end, tokens, index, kind, split_as, node, heading))
        return index

    def _add_gap(self, start: int, end: int) -> None:
        # Text no block token covers (link reference definitions, say) is still content.
        gap = self._text.doc[start:end]
        if gap.strip():
            lead = len(gap) - len(gap.lstrip())
            self._add_block(start + lead, end, "text", "lines", None)


# Characters at which an inline rule of the commonmark preset can start (escapes, code,
# emphasis, links, images, autolinks, HTML, entities, line breaks): without any of them, the
# inline parser returns the text as it is.
_INLINE_MARKUP = frozenset("\\`*_[]!<&\n\r")


def plain_inline(source: str, deadline: Deadline) -> str:
    """Return the visible text of an inline Markdown snippet (a heading's title)."""
    if _INLINE_MARKUP.isdisjoint(source):
        return " ".join(source.split())
    parts: list[str] = []

    def walk(tokens: Sequence[Token]) -> None:
        for tok in tokens:
            if tok.type in ("text", "code_inline"):
                parts.append(tok.content)
            elif tok.type in ("softbreak", "hardbreak"):
                parts.append(" ")
            if tok.children:
                walk(tok.children)

    walk(_inline_parser().parseInline(source, deadline.env()))
    return " ".join("".join(parts).split())
