"""Properties of semantic chunking over random Markdown, counted with the real MiniLM tokenizer."""

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rag_pipeline.core.chunking import ChunkingSettings, chunk_markdown
from rag_pipeline.core.models import Chunk, Section
from rag_pipeline_tests.chunking_support import FENCE_LINE, PARSER, Counter, decompose

# Property runs of a few hundred examples each: outside the unit tier's 90 s.
pytestmark = pytest.mark.slow

TABLE_DELIMITER = re.compile(r"^\|( *-+ *\|)+$")

PROPERTY_SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- random Markdown -----------------------------------------------------------------------

VOCABULARY = [
    "warehouse",
    "locator",
    "product",
    "order",
    "invoice",
    "payment",
    "client",
    "organization",
    "window",
    "tab",
    "field",
    "process",
    "report",
    "table",
    "column",
    "record",
    "document",
    "status",
    "price",
    "quantity",
    "the",
    "a",
    "of",
    "to",
    "and",
    "is",
    "AD_Table_ID",
    "M_Product",
    "C_Order",
    "@SQL=",
    "2Pack",
    "iDempiere",
    "naïve",
    "Überweisung",
    "účet",
    "10%",
    "a+b",
]
words = st.one_of(
    st.sampled_from(VOCABULARY),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=14),
)
# "Words" longer than any budget (identifiers, URLs, base64), to be drawn now and then.
blobs = st.text(alphabet="ABCDEFabcdef0123456789+/=", min_size=150, max_size=600)
common_words = st.one_of(st.sampled_from(VOCABULARY), st.text("abcdefgh", min_size=1, max_size=9))


@st.composite
def sentences(draw: st.DrawFn, long_words: bool = True) -> str:
    chosen = draw(st.lists(words if long_words else common_words, min_size=1, max_size=25))
    if long_words and draw(st.integers(min_value=0, max_value=7)) == 0:
        chosen.insert(draw(st.integers(0, len(chosen))), draw(blobs))
    return " ".join(chosen).capitalize() + draw(st.sampled_from([".", "!", "?", ".", ""]))


@st.composite
def paragraphs(draw: st.DrawFn) -> str:
    parts = draw(st.lists(sentences(), min_size=1, max_size=12))
    separators = draw(
        st.lists(st.sampled_from([" ", "\n"]), min_size=len(parts), max_size=len(parts))
    )
    return "".join(p + s for p, s in zip(parts, separators, strict=True)).strip()


@st.composite
def lists(draw: st.DrawFn) -> str:
    ordered = draw(st.booleans())
    start = draw(st.integers(min_value=1, max_value=12))
    lines: list[str] = []
    for index in range(draw(st.integers(min_value=1, max_value=14))):
        marker = f"{start + index}. " if ordered else "- "
        lines.append(marker + draw(sentences(long_words=False)))
        for _ in range(draw(st.integers(min_value=0, max_value=3))):
            lines.append(" " * len(marker) + "- " + draw(sentences(long_words=False)))
    return "\n".join(lines)


@st.composite
def fences(draw: st.DrawFn) -> str:
    info = draw(st.sampled_from(["", "java", "sql", "python title=setup.py"]))
    marker = draw(st.sampled_from(["```", "~~~", "````"]))
    code_line = st.lists(st.sampled_from([*VOCABULARY, "(", ")", "{", "}", "=", ";"]), max_size=16)
    body = [
        " " * draw(st.integers(0, 8)) + " ".join(draw(code_line))
        for _ in range(draw(st.integers(0, 40)))
    ]
    return "\n".join([marker + info, *body, marker])


@st.composite
def tables(draw: st.DrawFn) -> str:
    columns = draw(st.integers(min_value=1, max_value=4))
    cell = st.lists(common_words, min_size=1, max_size=6).map(" ".join)
    # Headers are short, as in real tables: a header longer than the budget cannot be
    # repeated, and is then cut like text (a limit stated in the chunking module).
    label = st.lists(common_words, min_size=1, max_size=3).map(" ".join)
    header = "| " + " | ".join(draw(label) for _ in range(columns)) + " |"
    delimiter = "|" + "---|" * columns
    rows = [
        "| " + " | ".join(draw(cell) for _ in range(columns)) + " |"
        for _ in range(draw(st.integers(min_value=0, max_value=25)))
    ]
    return "\n".join([header, delimiter, *rows])


@st.composite
def headings(draw: st.DrawFn) -> str:
    level = draw(st.integers(min_value=1, max_value=4))
    return "#" * level + " " + " ".join(draw(st.lists(common_words, min_size=1, max_size=5)))


@st.composite
def quotes(draw: st.DrawFn) -> str:
    return "\n".join("> " + line for line in draw(paragraphs()).split("\n"))


blocks = st.one_of(paragraphs(), lists(), fences(), tables(), headings(), quotes())
documents = st.lists(blocks, min_size=1, max_size=14).map("\n\n".join)
# Section headings and one-line texts, with other blocks now and then: sections smaller than
# `min_section_tokens` beside a sibling, the ones the chunker may fold.
section_headings = st.tuples(st.integers(1, 2), st.lists(common_words, min_size=1, max_size=4))
short_lines = st.lists(common_words, min_size=1, max_size=4).map(lambda w: " ".join(w) + ".")
sectioned_documents = st.lists(
    st.integers(0, 9).flatmap(
        lambda k: (
            section_headings.map(lambda h: "#" * h[0] + " " + " ".join(h[1]))
            if k < 4
            else short_lines
            if k < 8
            else blocks
        )
    ),
    min_size=1,
    max_size=14,
).map("\n\n".join)
chunk_settings = st.builds(
    ChunkingSettings,
    section_levels=st.sampled_from([(1, 2), (1,), (1, 2, 3)]),
    target_tokens=st.sampled_from([40, 100, 200]),
    max_tokens=st.sampled_from([64, 128, 256]),
    overlap_sentences=st.integers(min_value=0, max_value=2),
    min_section_tokens=st.sampled_from([0, 24, 60]),
)


# -- checks --------------------------------------------------------------------------------


def run(doc: str, count: Counter, config: ChunkingSettings) -> tuple[list[Section], list[Chunk]]:
    return chunk_markdown(
        doc, title="Random Page", breadcrumb="KB > Area", count_tokens=count, settings=config
    )


def own_and_synthetic(doc: str, chunks: list[Chunk], index: int) -> tuple[str, str, str]:
    """Return (overlap, synthetic prefix + suffix, own slice) of a chunk, checking the rest."""
    overlap, prefix, own, suffix = decompose(doc, chunks, index)
    return overlap, prefix + suffix, own


def fence_problems(markdown: str) -> int:
    """Fences left open, plus fence lines the parser did not pair (a count that must be even)."""
    lines = markdown.split("\n")
    problems = 0
    for token in PARSER.parse(markdown):
        if token.type == "fence" and token.map is not None:
            last = lines[token.map[1] - 1].strip()
            closed = token.map[1] - token.map[0] >= 2 and set(last) == {token.markup[0]}
            problems += not (closed and len(last) >= len(token.markup))
    fence_lines = sum(1 for line in lines if FENCE_LINE.match(line))
    return problems + fence_lines % 2


def table_heads(markdown: str) -> list[str]:
    """The header and delimiter rows of every table the parser sees."""
    lines = markdown.split("\n")
    return [
        "\n".join(lines[token.map[0] : token.map[0] + 2])
        for token in PARSER.parse(markdown)
        if token.type == "table_open" and token.map is not None
    ]


def table_problems(text: str) -> int:
    """Runs of table rows that do not open with a header and a delimiter row."""
    lines = text.split("\n")
    problems = 0
    for i, line in enumerate(lines):
        if line.startswith("|") and (i == 0 or not lines[i - 1].startswith("|")):
            problems += i + 1 >= len(lines) or not TABLE_DELIMITER.match(lines[i + 1])
    return problems


def titled_headings_with_text(doc: str, levels: tuple[int, ...]) -> list[tuple[int, str]]:
    """(offset, title) of each section heading with a title and a text block under it.

    A text block is any top-level block but a heading or a code fence (a fence may hold no
    word at all) before the next section heading.
    """
    starts = [0]
    for line in doc.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    found: list[tuple[int, str]] = []
    current: tuple[int, str] | None = None
    tokens = PARSER.parse(doc)
    for index, token in enumerate(tokens):
        if token.level != 0 or token.nesting < 0 or token.map is None:
            continue
        if token.type == "heading_open" and int(token.tag[1:]) in levels:
            title = " ".join(tokens[index + 1].content.split())
            current = (starts[token.map[0]], title) if title else None
        elif token.type != "heading_open" and token.type != "fence" and current is not None:
            found.append(current)
            current = None
    return found


# -- properties ----------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(doc=documents, config=chunk_settings)
def test_chunks_fit_the_budget_and_tile_their_sections(
    doc: str, config: ChunkingSettings, count_tokens: Counter
) -> None:
    sections, chunks = run(doc, count_tokens, config)
    assert sections
    assert "".join("".join(s.text for s in sections).split()) == "".join(doc.split())
    for item in chunks:
        assert item.token_count == count_tokens(item.embedded_text) <= config.max_tokens
    for section in sections:
        assert section.text == doc[section.start_char : section.end_char]
        mine = [i for i, c in enumerate(chunks) if c.section_ordinal == section.ordinal]
        assert mine
        # Without headers, overlap and the repeated fence/table lines, the chunks are the
        # section again, up to the whitespace between blocks.
        rebuilt = "".join(own_and_synthetic(doc, chunks, i)[2] for i in mine)
        assert "".join(rebuilt.split()) == "".join(section.text.split())


@PROPERTY_SETTINGS
@given(doc=sectioned_documents, config=chunk_settings)
def test_a_titled_section_with_text_is_never_folded(
    doc: str, config: ChunkingSettings, count_tokens: Counter
) -> None:
    # Issue 47: however short, it is found under its own title, not its neighbour's.
    sections, _ = run(doc, count_tokens, config)
    for offset, title in titled_headings_with_text(doc, config.section_levels):
        (holder,) = [s for s in sections if s.start_char <= offset < s.end_char]
        assert (holder.title, holder.heading_path[-1]) == (title, title)


@PROPERTY_SETTINGS
@given(doc=documents, config=chunk_settings)
def test_no_fence_or_table_is_left_unbalanced(
    doc: str, config: ChunkingSettings, count_tokens: Counter
) -> None:
    assert fence_problems(doc) == 0
    # The contract's precondition: a table whose header and delimiter rows alone do not fit
    # in a chunk cannot stay balanced without breaking the token budget, and the budget wins
    # (the chunker then cuts it like text, as its docstring says). The room for text never
    # drops below 3/4 of the budget (longer context headers are shortened), so headers up to
    # half the budget always fit.
    assume(all(count_tokens(head) <= config.max_tokens // 2 for head in table_heads(doc)))
    _, chunks = run(doc, count_tokens, config)
    for item in chunks:
        assert fence_problems(item.text) == 0, item.text
        assert table_problems(item.text) == 0, item.text


@PROPERTY_SETTINGS
@given(doc=documents, config=chunk_settings)
def test_overlap_is_whole_sentences_of_the_same_section(
    doc: str, config: ChunkingSettings, count_tokens: Counter
) -> None:
    _, chunks = run(doc, count_tokens, config)
    for index in range(len(chunks)):
        overlap, _, _ = own_and_synthetic(doc, chunks, index)
        if not config.overlap_sentences:
            assert not overlap
        assert not FENCE_LINE.match(overlap)
        assert not overlap.lstrip().startswith("|")


@PROPERTY_SETTINGS
@given(doc=documents, config=chunk_settings)
def test_chunking_is_deterministic(
    doc: str, config: ChunkingSettings, count_tokens: Counter
) -> None:
    assert run(doc, count_tokens, config) == run(doc, count_tokens, config)


@settings(max_examples=100, deadline=None)
@given(doc=st.text(max_size=3000), config=chunk_settings)
def test_any_text_at_all_is_chunked_within_budget(
    doc: str, config: ChunkingSettings, count_tokens: Counter
) -> None:
    sections, chunks = run(doc, count_tokens, config)
    if not doc.strip():
        assert (sections, chunks) == ([], [])
        return
    assert "".join("".join(s.text for s in sections).split()) == "".join(doc.split())
    for item in chunks:
        assert item.token_count == count_tokens(item.embedded_text) <= config.max_tokens
        assert sections[item.section_ordinal].start_char <= item.start_char < item.end_char
    for section in sections:
        own = "".join(
            doc[c.start_char : c.end_char] for c in chunks if c.section_ordinal == section.ordinal
        )
        assert "".join(own.split()) == "".join(section.text.split())
    assert run(doc, count_tokens, config) == (sections, chunks)
