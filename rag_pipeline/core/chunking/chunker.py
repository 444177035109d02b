"""One document's chunking run: sections, then each section's chunks with their headers."""

from collections.abc import Sequence

from rag_pipeline.core.chunking.blocks import ParsedBlocks, parse_blocks
from rag_pipeline.core.chunking.pack import pack
from rag_pipeline.core.chunking.sections import SectionDraft, keeps_its_title, section_drafts
from rag_pipeline.core.chunking.settings import (
    DEFAULT_SETTINGS,
    DEFAULT_TIME_BUDGET_SECONDS,
    ChunkingSettings,
    ChunkLimitError,
    TokenCounter,
    context_header,
)
from rag_pipeline.core.chunking.split import Splitter
from rag_pipeline.core.chunking.text import DocumentText, Piece
from rag_pipeline.core.models import Chunk, Section
from rag_pipeline.core.time_budget import Deadline, TimeBudgetError

# A tokenizer that is not additive over whitespace makes the block-sum estimate low; each
# retry shrinks the room by the observed overshoot, so this is never reached in practice.
_MAX_ATTEMPTS = 8


def chunk_markdown(
    markdown: str,
    *,
    title: str,
    breadcrumb: str,
    count_tokens: TokenCounter,
    settings: ChunkingSettings = DEFAULT_SETTINGS,
    time_budget_seconds: float | None = DEFAULT_TIME_BUDGET_SECONDS,
) -> tuple[list[Section], list[Chunk]]:
    """Cut a Markdown document into parent sections and embeddable chunks.

    Args:
        markdown: The document (CommonMark + GFM tables).
        title: The document title; names the section before the first heading.
        breadcrumb: The document's location, used in every chunk's context header.
        count_tokens: The embedding model's token counter.
        settings: Section levels and token budgets.
        time_budget_seconds: Most seconds chunking may take (None: no limit).

    Returns:
        The sections in document order and the chunks in document order. A chunk's
        `start_char`/`end_char` delimit its own source text (without the overlap repeated
        from the previous chunk); `token_count` is `count_tokens(embedded_text)`, never over
        `settings.max_tokens`.

    Raises:
        ValueError: If `max_tokens` leaves no room for even a single character.
        ChunkLimitError: The document needs more than `settings.max_chunks` chunks, or more
            than `time_budget_seconds` to chunk.
    """
    if not markdown.strip():
        return [], []
    deadline = Deadline.after(time_budget_seconds)
    try:
        return _Chunker(markdown, title, breadcrumb, count_tokens, settings, deadline).run()
    except TimeBudgetError:
        raise ChunkLimitError(
            f"document took more than {time_budget_seconds:g} s to chunk (RAG_MAX_CONVERT_SECONDS)"
        ) from None


class _Chunker:
    """One document's chunking run: sections, chunk texts, headers and overlap."""

    def __init__(
        self,
        doc: str,
        title: str,
        breadcrumb: str,
        count_tokens: TokenCounter,
        settings: ChunkingSettings,
        deadline: Deadline,
    ) -> None:
        self._text = DocumentText(doc, count_tokens, settings, deadline)
        self._title = title
        self._breadcrumb = breadcrumb
        self._settings = settings
        self._parsed = ParsedBlocks()
        self._splitter = Splitter(self._text, self._parsed, self._pack)
        self._sentence_cache: dict[int, list[tuple[int, int]]] = {}
        self._header_cache: dict[tuple[tuple[str, ...], str], str] = {}

    def _pack(
        self, items: list[Piece], first_room: int, room: int, target: int
    ) -> list[list[Piece]]:
        return pack(items, first_room, room, target, text=self._text, splitter=self._splitter)

    def run(self) -> tuple[list[Section], list[Chunk]]:
        parsed = parse_blocks(self._text)
        self._parsed.tokens, self._parsed.blocks = parsed.tokens, parsed.blocks
        self._parsed.headings = parsed.headings
        doc, settings = self._text.doc, self._settings
        specials = self._text.specials

        def tiny(draft: SectionDraft) -> bool:
            # The size test first: it is free, and only a small section's text is read.
            small = draft.tokens + specials < settings.min_section_tokens
            return small and not keeps_its_title(draft, self._text)

        drafts = section_drafts(
            parsed.blocks,
            parsed.headings,
            title=self._title,
            levels=settings.section_levels,
            tiny=tiny,
        )
        sections: list[Section] = []
        chunks: list[Chunk] = []
        for draft in drafts:
            start, end = draft.blocks[0].start, draft.blocks[-1].end
            ordinal = len(sections)
            sections.append(Section(ordinal, draft.title, draft.path, doc[start:end], start, end))
            for text, embedded, count, c_start, c_end in self._section_chunks(draft):
                chunks.append(Chunk(len(chunks), ordinal, text, embedded, count, c_start, c_end))
            if len(chunks) > settings.max_chunks:
                # Stop at once: the rest of a runaway document is not worth chunking.
                raise ChunkLimitError(
                    f"document needs more than {settings.max_chunks:,} chunks "
                    "(RAG_MAX_CHUNKS_PER_DOCUMENT)"
                )
        return sections, chunks

    def _header(self, path: tuple[str, ...], omit: str = "") -> str:
        cached = self._header_cache.get((path, omit))
        if cached is not None:
            return cached
        # A header eating a quarter of the budget is not "short" any more: drop the parts
        # that matter least for retrieval until it fits.
        limit = self._settings.max_tokens // 4
        title, crumb = self._title, self._breadcrumb
        header = ""
        for parts in ((title, crumb, path), (title, "", path), ("", "", path), ("", "", path[-1:])):
            candidate = context_header(*parts, omit=omit)
            if self._text.text_tokens(candidate) <= limit:
                header = candidate
                break
        self._header_cache[(path, omit)] = header
        return header

    def _section_chunks(self, draft: SectionDraft) -> list[tuple[str, str, int, int, int]]:
        settings, text = self._settings, self._text
        header = self._header(draft.path)
        # The section's first chunk opens with the section's own heading line.
        opens_with_heading = bool(draft.blocks) and draft.blocks[0].heading
        first_header = self._header(draft.path, omit=draft.title) if opens_with_heading else header
        header_tokens = text.text_tokens(header)
        full_room = settings.max_tokens - text.specials - header_tokens
        shrink = 0
        for _ in range(_MAX_ATTEMPTS):
            room = full_room - shrink
            if room < 1:
                break
            target = max(1, min(room, settings.target_tokens - text.specials - header_tokens))
            groups = [g for g in self._pack(list(draft.blocks), room, room, target) if g]
            out: list[tuple[str, str, int, int, int]] = []
            worst = 0
            for index, group in enumerate(groups):
                texts = [text.group_text(group)]
                if index > 0:
                    overlapped = self._with_overlap(groups[index - 1][-1], group, texts[0], room)
                    if overlapped is not None:
                        texts.insert(0, overlapped)
                over = 0
                for body in texts:
                    # Only shorter than `header`, so the room computed above still holds.
                    embedded = (first_header if index == 0 else header) + body
                    count = text.count(embedded)
                    cost = text.cost_of_count(embedded, count)
                    over = max(count, cost + text.specials) - settings.max_tokens
                    if over <= 0:
                        out.append((body, embedded, count, group[0].start, group[-1].end))
                        break
                else:
                    worst = max(worst, over)
            if worst == 0:
                return out
            shrink += worst
        raise ValueError(
            f"max_tokens={settings.max_tokens} leaves no room for the text of section "
            f"{draft.title!r} after its context header"
        )

    def _with_overlap(
        self, prev: Piece, group: Sequence[Piece], body: str, room: int
    ) -> str | None:
        """Return the chunk text with the previous chunk's last sentences in front, if they fit.

        Sentences are taken only from prose (a paragraph), never from code, tables or lists,
        and not in front of a heading, which starts a new topic anyway.
        """
        wanted = self._settings.overlap_sentences
        first = group[0]
        if wanted == 0 or prev.kind != "paragraph" or prev.suffix or first.heading:
            return None
        block = self._parsed.blocks[prev.block]
        inside = [s for s in self._sentences_of_block(block) if s[0] >= prev.start]
        inside = [s for s in inside if s[1] <= prev.end]
        # Only whole sentences: a piece cut inside a sentence has no clean tail to repeat.
        if not inside or inside[-1][1] != prev.end:
            return None
        start = inside[-wanted:][0][0]
        overlap_tokens = self._text.span_tokens(start, prev.end)
        if self._text.group_tokens(group) + overlap_tokens > room:
            return None
        doc = self._text.doc
        between = doc[prev.end : first.start]
        if first.block == prev.block and not first.prefix and between.isspace():
            # The same paragraph goes on: keep the source's own spacing.
            return doc[start : first.start] + body
        return doc[start : prev.end] + "\n\n" + body

    def _sentences_of_block(self, block: Piece) -> list[tuple[int, int]]:
        cached = self._sentence_cache.get(block.block)
        if cached is None:
            cached = self._text.sentences(block.start, block.end)
            self._sentence_cache[block.block] = cached
        return cached
