"""YAML front matter: split into metadata; a leading thematic break is content, not an error."""

import pytest

from rag_pipeline.core.frontmatter import FrontMatterError, split_front_matter


def test_front_matter_becomes_metadata() -> None:
    meta, rest = split_front_matter("---\ntitle: Locators\ndate: 2026-11-30\n---\n# H\n")
    assert meta == {"title": "Locators", "date": "2026-11-30"}
    assert rest == "# H\n"


def test_crlf_front_matter() -> None:
    meta, rest = split_front_matter("---\r\ntitle: A\r\n---\r\nBody\r\n")
    assert meta == {"title": "A"}
    assert rest.strip() == "Body"


@pytest.mark.parametrize(
    "text",
    ["---\nIntroduction\n---\n\nText.\n", "# No front matter\n\n---\n", "---\n---\n"],
)
def test_text_that_only_looks_like_front_matter_is_content(text: str) -> None:
    assert split_front_matter(text) == ({}, text)


def test_broken_yaml_is_a_clear_error() -> None:
    with pytest.raises(FrontMatterError, match="not valid YAML"):
        split_front_matter("---\ntitle: [unclosed\n---\nBody\n")
