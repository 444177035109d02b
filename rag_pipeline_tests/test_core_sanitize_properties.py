"""Property tests for rag_pipeline.core.sanitize.

Inputs are arbitrary Unicode (surrogates, controls, noncharacters and all) and Markdown
assembled from fragments that exercise every rule. Whatever comes in, the output is a fixed
point, NFC, free of forbidden characters and UTF-8 encodable; code block content is
untouched; and (zero-width characters aside) the HTML that markdown-it renders is the same
before and after, so no rule changes what a document says.
"""

import re
import string
import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from rag_pipeline.core.sanitize import (
    FORBIDDEN_CHARACTERS,
    SanitizeResult,
    sanitize_text,
)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RENDERER = MarkdownIt("commonmark").enable("table")

any_character = st.characters(exclude_categories=())  # includes Cs (lone surrogates) and Cc
special_characters = st.sampled_from(
    [*"\x00\x07\x1b\x7f\x85\r\n\t \u2028\u2029\ufeff\u200b\u200c\u200d\u2060\ufffe\uffff",
     "\U0010ffff", "\ud800", "\udc80", "\ud83d\ude00", "e\u0301", "\u200f"]
)  # fmt: skip
# Markdown fragments touching every rule: code, tables, links, hard breaks, entities ...
fragments = st.sampled_from(
    ["\n", "\n", "\n\n\n", "  \n", " \t\n", "    ", "\t", "`", "``", "```\n", "~~~\n", "- ",
     "1. ", "> ", "# ", "===\n", "---\n", "*", "_", "~~", "\\", "[", "]", "](", "(", ")",
     "<", ">", "!", "&", ";", "%", "%20", "%C3%A9", "%2F", "%25", "%FF", "+", "|", "| a | b |\n",
     "|---|---|\n", "[a](b%20c)", "![i](x%C3%A9.png)", "<http://a/%C3%A9>", "[r]: /u%20v\n",
     "<pre>\n", "</pre>\n", "<span ", "&amp;", "&lt;", "&gt;", "&nbsp;", "&#42;", "&#96;",
     "http://", "a", "b", "word", "é", "😀", "\u200d", "\u200b", "\ufeff", "\r\n"]
)  # fmt: skip
markdown = st.lists(
    st.one_of(fragments, fragments, special_characters, any_character), max_size=60
).map("".join)


def assert_clean(result: SanitizeResult) -> None:
    text = result.text
    assert not FORBIDDEN_CHARACTERS.search(text)
    assert "\x00" not in text
    assert unicodedata.is_normalized("NFC", text)
    assert text.encode("utf-8").decode("utf-8") == text  # no surrogates
    assert all(value > 0 for value in result.counts.values())


def assert_fixed_point(result: SanitizeResult) -> None:
    again = sanitize_text(result.text)
    assert again.text == result.text
    assert again.counts == {}


@SETTINGS
@given(st.text(any_character, max_size=200))
def test_arbitrary_unicode(text: str) -> None:
    result = sanitize_text(text)
    assert_clean(result)
    assert_fixed_point(result)


@SETTINGS
@given(markdown)
def test_markdown_mixtures(text: str) -> None:
    result = sanitize_text(text)
    assert_clean(result)
    assert_fixed_point(result)


# Markdown without zero-width characters: every rule left must keep the rendered HTML.
rendering_fragments = st.sampled_from(
    ["\n", "\n", "\n\n\n", "  \n", " \t\n", "   \n", "    ", "\t", "`", "```\n", "- ", "1. ",
     "> ", "# ", "===\n", "*", "_", "\\", "[", "]", "](", "(", ")", "<", ">", "&", ";", "%20",
     "%C3%A9", "%2F", "%25", "%FF", "+", "| a | b |\n", "|---|---|\n", "[a](b%20c)",
     "[a](<b%20c> \"t\")", "![i](x%C3%A9%20y.png)", "<http://a/%C3%A9>", "[r]: /u%20v\n",
     "[r]", "<span ", "&amp;", "&lt;", "&gt;", "&nbsp;", "&quot;", "&#42;", "&#124;", "a", "b",
     "word ", "é", "e\u0301", "😀"]
)  # fmt: skip
_TRAILING_SPACE_BEFORE_BREAK = re.compile(r"[ \t]+(?=(?:<br />)?\n)")


def render(text: str) -> str:
    # Spaces before a line break are invisible in HTML; the renderer keeps some of them.
    html = _TRAILING_SPACE_BEFORE_BREAK.sub("", RENDERER.render(text))
    return unicodedata.normalize("NFC", html)


@SETTINGS
@given(st.lists(rendering_fragments, max_size=50).map("".join))
def test_rendered_html_is_unchanged(text: str) -> None:
    result = sanitize_text(text)
    assert render(result.text) == render(text)


# Fenced code: the content lines, whatever they hold, come out byte for byte.
code_character = st.one_of(
    st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp", "Cn", "Co")),
    st.sampled_from(list(" \t\u200b\u200c\u200d\u2060\ufeff%&<>[]()`~|\\")),
)
code_content = (
    st.lists(st.text(code_character, max_size=30), min_size=1, max_size=8)
    .map("\n".join)
    .filter(lambda content: unicodedata.is_normalized("NFC", content))
)
prose = st.text(string.ascii_letters + " .,%+&\u200b", max_size=40)


@SETTINGS
@given(prose, code_content, st.sampled_from(["`", "~"]), st.text("abc", max_size=5), prose)
def test_fenced_code_content_is_byte_identical(
    before: str, content: str, marker: str, info: str, after: str
) -> None:
    # The fence is longer than any run of its marker inside, so no content line closes it.
    longest = max((len(run) for run in re.findall(f"{re.escape(marker)}+", content)), default=0)
    fence = marker * max(3, longest + 1)
    block = f"{fence}{info}\n{content}\n{fence}\n"
    result = sanitize_text(f"{before}\n\n{block}\n{after}")
    assert block in result.text
    assert_fixed_point(result)


@SETTINGS
@given(st.lists(st.text(code_character, max_size=20), min_size=1, max_size=6))
def test_indented_code_content_is_byte_identical(lines: list[str]) -> None:
    block = "".join(f"    x{line}\n" for line in lines)
    if not unicodedata.is_normalized("NFC", block):
        return
    result = sanitize_text(f"Intro\n\n{block}\nOutro")
    assert block in result.text


@SETTINGS
@given(st.text(string.ascii_letters + string.digits + " %+.,;:/?=#!-", max_size=80))
def test_prose_percent_signs_are_never_decoded(text: str) -> None:
    # No link syntax: whatever %XX, '+' or '%' the prose holds, it is kept.
    result = sanitize_text(text.strip())
    assert result.text == text.strip()
