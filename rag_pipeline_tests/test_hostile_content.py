"""Issue 14, content: YAML bombs, deep nesting, cost amplification, NUL, a headless table."""

import pytest

from rag_pipeline.core.chunking import ChunkingSettings, ChunkLimitError, chunk_markdown
from rag_pipeline.core.frontmatter import FrontMatterError, split_front_matter
from rag_pipeline.core.normalize import NormalizationError, SourceFormat, to_markdown
from rag_pipeline.settings import load_settings
from rag_pipeline_tests.chunking_support import Counter
from rag_pipeline_tests.hostile_inputs import FULL_SIZE

# A 420-byte "billion laughs": nine levels of nine aliases each.
YAML_BOMB = (
    "---\n"
    + "\n".join(
        [
            'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
            *(
                f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]"
                for i in range(8)
            ),
        ]
    )
    + "\n---\n\nBody\n"
)


def chunk(markdown: str, count: Counter, **settings: object) -> list[str]:
    _, chunks = chunk_markdown(
        markdown,
        title="T",
        breadcrumb="",
        count_tokens=count,
        settings=ChunkingSettings(**settings),  # type: ignore[arg-type]
    )
    return [c.text for c in chunks]


# -- front matter ----------------------------------------------------------------------------


def test_a_yaml_alias_bomb_fails_its_document_at_once() -> None:
    with pytest.raises(FrontMatterError, match="alias"):
        split_front_matter(YAML_BOMB)


def test_a_single_alias_is_refused_too() -> None:
    with pytest.raises(FrontMatterError, match="alias"):
        split_front_matter("---\nbase: &b x\ncopy: *b\n---\nBody\n")


def test_deep_front_matter_is_refused() -> None:
    with pytest.raises(FrontMatterError, match="nested deeper"):
        split_front_matter("---\nk: " + "[" * 50 + "]" * 50 + "\n---\nBody\n")


def test_huge_front_matter_is_refused() -> None:
    lines = "\n".join(f"key{i}: {'x' * 60}" for i in range(2000))
    with pytest.raises(FrontMatterError, match="over the limit"):
        split_front_matter(f"---\n{lines}\n---\nBody\n")


def test_ordinary_front_matter_still_works() -> None:
    meta, rest = split_front_matter("---\ntitle: A\ntags: [x, y]\nmeta: {a: {b: 1}}\n---\nB\n")
    assert meta == {"title": "A", "tags": ["x", "y"], "meta": {"a": {"b": 1}}}
    assert rest == "B\n"


# -- nesting: never silent loss -------------------------------------------------------------


def test_a_list_nested_1500_levels_fails_with_the_reason() -> None:
    doc = "".join("  " * i + f"- w{i}\n" for i in range(1500))
    with pytest.raises(NormalizationError, match="nested too deeply"):
        to_markdown(doc, SourceFormat.MARKDOWN)


def test_a_100000_level_blockquote_fails_with_the_reason() -> None:
    with pytest.raises(NormalizationError, match="nested too deeply"):
        to_markdown(">" * 100_000 + " the text\n", SourceFormat.MARKDOWN)


def test_nesting_below_the_cap_keeps_every_word() -> None:
    doc = "".join("  " * i + f"- w{i}\n" for i in range(40))
    words = to_markdown(doc, SourceFormat.MARKDOWN).markdown.split()
    assert [w for w in words if w.startswith("w")] == [f"w{i}" for i in range(40)]


# -- cost caps ----------------------------------------------------------------------------


def test_a_document_over_the_chunk_cap_fails_with_the_reason(count_tokens: Counter) -> None:
    doc = "\n\n".join(f"Paragraph {i} about warehouses and locators." for i in range(400))
    with pytest.raises(ChunkLimitError, match="more than 10 chunks"):
        chunk(doc, count_tokens, max_chunks=10, target_tokens=40, max_tokens=64)


def test_a_huge_single_word_is_cut_by_characters(count_tokens: Counter) -> None:
    # One [UNK] token however long: without a character cap it would be one tiny chunk.
    word = "x" * 200_000
    texts = chunk(word, count_tokens, max_chunk_chars=4000)
    assert len(texts) >= 200_000 // 4000
    assert all(len(text) <= 4000 for text in texts)
    assert "".join(texts) == word


def test_the_caps_are_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_MAX_CHUNKS_PER_DOCUMENT", "50")
    monkeypatch.setenv("RAG_MAX_CHUNK_CHARS", "3000")
    monkeypatch.setenv("RAG_MAX_CONVERT_SECONDS", "5")
    settings = load_settings()
    assert (
        settings.max_chunks_per_document,
        settings.max_chunk_chars,
        settings.max_convert_seconds,
    ) == (50, 3000, 5.0)


def test_conversion_past_its_time_budget_fails_the_document() -> None:
    # 200,000 "[" take many seconds in markdown-it; a tiny budget must stop it, with a reason.
    with pytest.raises(NormalizationError, match="to convert"):
        to_markdown("[" * 200_000, SourceFormat.MARKDOWN, time_budget_seconds=0.05)


def test_a_time_budget_does_not_disturb_quick_work() -> None:
    assert to_markdown("[a](b)", SourceFormat.MARKDOWN, time_budget_seconds=5).markdown


# -- NUL ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "body"),
    [
        (SourceFormat.MARKDOWN, "a\x00b `c\x00d`\n\n```\nx\x00y\n```\n"),
        (SourceFormat.HTML, "<p>a\x00b</p>"),
        (SourceFormat.TEXT, "a\x00b"),
        (SourceFormat.EDITORJS, '{"blocks":[{"type":"paragraph","data":{"text":"a\\u0000b"}}]}'),
    ],
)
def test_nul_is_removed_not_replaced(fmt: SourceFormat, body: str) -> None:
    markdown = to_markdown(body, fmt).markdown
    assert "\x00" not in markdown
    assert "\ufffd" not in markdown
    assert "ab" in markdown


# -- the chunker's headless table -------------------------------------------------------------


def test_a_header_only_table_under_a_heading_is_not_split_into_junk(
    count_tokens: Counter,
) -> None:
    # Found by test_no_fence_or_table_is_left_unbalanced: the heading took the header row and
    # the next chunk was a blank repeated header over the lone delimiter row.
    header = "| " + " | ".join([" ".join(["cell"] * 10)] * 4) + " |"
    table = f"{header}\n|---|---|---|---|"
    settings = ChunkingSettings(
        section_levels=(1,), target_tokens=40, max_tokens=128, min_section_tokens=0
    )
    _, chunks = chunk_markdown(
        f"## word\n\n{table}",
        title="Random Page",
        breadcrumb="KB > Area",
        count_tokens=count_tokens,
        settings=settings,
    )
    texts = [c.text for c in chunks]
    assert all("| | |" not in text for text in texts), texts
    assert any(text.endswith(table) for text in texts), texts


# -- the full-size inputs (opt-in: `pytest -m long`; timings: benchmarks/hostile.py) --


@pytest.mark.long
@pytest.mark.parametrize("name", list(FULL_SIZE))
def test_full_size_hostile_documents_are_bounded(name: str, count_tokens: Counter) -> None:
    settings = ChunkingSettings()
    reason = ""
    chunks = []
    try:
        markdown = to_markdown(FULL_SIZE[name], SourceFormat.MARKDOWN).markdown
        _, chunks = chunk_markdown(
            markdown, title="T", breadcrumb="", count_tokens=count_tokens, settings=settings
        )
    except ValueError as error:
        reason = str(error)
    # Failing is fine, with a reason a person can act on; succeeding stays within the caps.
    assert reason or chunks
    assert len(chunks) <= settings.max_chunks
    assert all(len(c.embedded_text) <= settings.max_chunk_chars for c in chunks)
