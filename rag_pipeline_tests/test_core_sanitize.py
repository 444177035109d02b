"""Golden cases for rag_pipeline.core.sanitize, rule by rule, including the seed's bugs.

Seed ADR-067 URL-decoded whole documents and collapsed every run of spaces. The cases named
`seed_*` are the inputs its approach corrupts; here they must come out unchanged.
"""

import dataclasses
import json
import re

import pytest
from markdown_it import MarkdownIt

from rag_pipeline.core.models import SourceFormat
from rag_pipeline.core.normalize import to_markdown
from rag_pipeline.core.sanitize import (
    FORBIDDEN_CHARACTERS,
    SANITIZER_VERSION,
    SanitizeResult,
    find_forbidden,
    sanitize_text,
)

RENDERER = MarkdownIt("commonmark").enable("table")


def hrefs(markdown: str) -> list[str]:
    """Every link and image target markdown-it renders, in order."""
    found = re.findall(r'(?:href|src)="([^"]*)"', RENDERER.render(markdown))
    # %c3%a9 and %C3%A9 are the same URL (RFC 3986 2.1)
    return [re.sub("%[0-9a-f]{2}", lambda m: m.group().upper(), href) for href in found]


def check(source: str, expected: str, counts: dict[str, int]) -> None:
    result = sanitize_text(source)
    assert result.text == expected
    assert result.counts == counts
    again = sanitize_text(result.text)
    assert again == SanitizeResult(result.text, {})


# --- contract ----------------------------------------------------------------------------


def test_version_is_a_calendar_version() -> None:
    assert re.fullmatch(r"\d{4}\.\d{1,2}\.\d+", SANITIZER_VERSION)


def test_result_is_frozen() -> None:
    result = sanitize_text("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.text = "y"  # pyright: ignore[reportAttributeAccessIssue]


def test_clean_text_is_returned_unchanged_with_no_counts() -> None:
    text = "# Title\n\nA paragraph with `code`, a [link](http://a/b) and | pipes |.\n"
    assert sanitize_text(text) == SanitizeResult(text, {})


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("clean\ttext\n", []),
        ("a\x00b", [(1, "'\\x00'")]),
        ("\r\n", [(0, "'\\r'")]),
        ("x\ud800", [(1, "'\\ud800'")]),
        ("\u2028\x85\ufdd0\ufffe\U0010ffff", [(0, "'\\u2028'"), (1, "'\\x85'"), (2, "'\\ufdd0'"),
                                             (3, "'\\ufffe'"), (4, "'\\U0010ffff'")]),
        ("\u200b\u200e\ufffd\ufdcf", []),  # zero-width (allowed in code), RLM, U+FFFD
    ],
)  # fmt: skip
def test_find_forbidden(text: str, found: list[tuple[int, str]]) -> None:
    assert find_forbidden(text) == found
    assert bool(FORBIDDEN_CHARACTERS.search(text)) == bool(found)


# --- rule 1: surrogates --------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected", "counts"),
    [
        ("a\ud800b", "a\ufffdb", {"surrogates_repaired": 1}),
        ("\udcff", "\ufffd", {"surrogates_repaired": 1}),  # surrogateescape of byte 0xFF
        (json.loads('"x\\udc00\\ud800"'), "x\ufffd\ufffd", {"surrogates_repaired": 2}),
        ("\ud83d\ude00!", "😀!", {"surrogate_pairs_joined": 1}),  # CESU-8 style pair
        ("\ufffd stays", "\ufffd stays", {}),
    ],
)
def test_lone_surrogates_become_replacement_characters(
    source: str, expected: str, counts: dict[str, int]
) -> None:
    check(source, expected, counts)


def test_surrogateescape_text_round_trip() -> None:
    text = b"ok \xff end".decode("utf-8", "surrogateescape")
    assert sanitize_text(text).text == "ok \ufffd end"


# --- rule 2: controls, newlines, noncharacters ----------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected", "counts"),
    [
        ("Hello\x00World", "HelloWorld", {"nul_removed": 1}),  # seed testRemovesNullBytes
        ("Hello\x07World\x1b", "HelloWorld", {"controls_removed": 2}),  # seed test
        ("a\x0bb\x0cc\x7fd\x85e\x9ff", "abcdef", {"controls_removed": 5}),  # VT FF DEL C1
        ("Line1\n\tIndented", "Line1\n\tIndented", {}),  # seed testPreservesNewlinesAndTabs
        ("Line1\r\nLine2\rLine3", "Line1\nLine2\nLine3", {"newlines_normalized": 2}),
        ("a\r\r\nb", "a\n\nb", {"newlines_normalized": 2}),
        ("a\u2028b\u2029c", "a\nb\nc", {"newlines_normalized": 2}),
        ("a\ufffeb\uffffc\ufdd0d\ufdefe", "abcde", {"noncharacters_removed": 4}),
        ("a\U0001fffeb\U0010ffff", "ab", {"noncharacters_removed": 2}),
        ("\ufdcf\ufdf0\ufffd", "\ufdcf\ufdf0\ufffd", {}),  # neighbours of the range are text
    ],
)
def test_controls_newlines_and_noncharacters(
    source: str, expected: str, counts: dict[str, int]
) -> None:
    check(source, expected, counts)


def test_seed_pg_dump_compatibility() -> None:
    result = sanitize_text("User's data\x00with null\tand\ttabs")
    assert result.text == "User's datawith null\tand\ttabs"
    assert "\x00" not in result.text
    assert result.text.encode("utf-8").decode("utf-8") == result.text


# --- rule 3: NFC ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("e\u0301te\u0301", "été"),
        ("\u212b", "\u00c5"),  # ANGSTROM SIGN
        ("\u1100\u1161", "\uac00"),  # Hangul jamo
        ("Mu\u0308ller", "Müller"),
    ],
)
def test_nfc(source: str, expected: str) -> None:
    check(source, expected, {"nfc_changed": 1})


# --- rule 4: zero-width characters --------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected", "removed"),
    [
        ("foo\u200bbar", "foobar", 1),
        ("word\u2060joiner \ufeffbom", "wordjoiner bom", 2),
        ("\ufeff# Title", "# Title", 1),
        ("a\u200db a\u200cb", "ab ab", 2),  # stray joiners next to ASCII
        ("\u200d😀 😀\u200d", "😀 😀", 2),  # joiners at word edges
        ("```\nx\u200by\n```\nout\u200bside\n", "```\nx\u200by\n```\noutside\n", 1),
        ("~~~~\nx\u200b\n~~~~\n", "~~~~\nx\u200b\n~~~~\n", 0),
        ("    code\u200b\n\npara\u200b\n", "    code\u200b\n\npara\n", 1),
        ("in `co\u200bde` and out\u200b", "in `co\u200bde` and out", 1),
        ("``a\u200b\nb\u200b`` c\u200b", "``a\u200b\nb\u200b`` c", 1),  # multi-line span
        ("- item `x\u200b` y\u200b", "- item `x\u200b` y", 1),
        ("| `a\u200b` | b\u200b |\n| - | - |\n", "| `a\u200b` | b |\n| - | - |\n", 1),
        ("<pre>\nx\u200b\n</pre>\n", "<pre>\nx\u200b\n</pre>\n", 0),
    ],
)
def test_zero_width_removed_outside_code(source: str, expected: str, removed: int) -> None:
    check(source, expected, {"zero_width_removed": removed} if removed else {})


@pytest.mark.parametrize(
    "text",
    [
        "👨\u200d👩\u200d👧\u200d👦 family",  # emoji ZWJ sequence
        "🏳\ufe0f\u200d🌈 flag",
        "👩\u200d💻 and 🧑🏽\u200d🚀",
        "می\u200cخواهم",  # Persian ZWNJ
        "क्\u200dष",  # Devanagari ZWJ
        "abc \u200f\u05e9\u05dc\u05d5\u05dd\u200e def",  # RTL/LTR marks are text
    ],
)
def test_meaningful_joiners_and_bidi_marks_are_kept(text: str) -> None:
    check(text, text, {})


def test_zero_width_removal_that_uncovers_a_fence_converges() -> None:
    # The BOM hides the fence: everything is prose in the first parse, a fence afterwards.
    source = "\ufeff```\ncode\u200b\n```\n"
    check(source, "```\ncode\n```\n", {"zero_width_removed": 2})


def test_zero_width_kept_in_code_that_becomes_prose_is_removed_in_the_same_call() -> None:
    # First parse: line 2 opens a fence holding line 3. Without the U+FEFF, lines 1-2 are
    # the fence and line 3 is prose, so its U+200B must go too.
    source = "\ufeff```\n```\n\u200bx\n"
    check(source, "```\n```\nx\n", {"zero_width_removed": 2})


# --- rule 5: whitespace --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected", "counts"),
    [
        ("Hello    World", "Hello    World", {}),  # seed_normalizes_multiple_spaces: kept
        ("foo \nbar\t\nbaz", "foo\nbar\nbaz", {"trailing_spaces_removed": 2}),
        ("foo  \n\nbar   ", "foo\n\nbar", {"trailing_spaces_removed": 2}),  # not hard breaks
        ("a\n\n\nb", "a\n\nb", {"blank_lines_collapsed": 1}),
        ("a\n\n\n\n\nb\n", "a\n\nb\n", {"blank_lines_collapsed": 3}),
        ("a\n \n\t\n\nb", "a\n\nb", {"trailing_spaces_removed": 2, "blank_lines_collapsed": 2}),
        ("a\n\nb\n\n", "a\n\nb\n\n", {}),
        ("a\n\n\n", "a\n\n", {"blank_lines_collapsed": 1}),
        ("  lead\n", "  lead\n", {}),  # leading indentation is never touched
        ("> quote  \n>\n>\n> more", "> quote\n>\n>\n> more", {"trailing_spaces_removed": 1}),
    ],
)
def test_trailing_space_and_blank_lines(source: str, expected: str, counts: dict[str, int]) -> None:
    check(source, expected, counts)


@pytest.mark.parametrize(
    "verbatim",
    [
        "```\ndef f():   \n\n\n\n    return 1\t\n```\n",
        "~~~python\nx = 1  \n\n\n~~~\n",
        "````\n```\ninner   \n```\n\n\n````\n",  # a longer fence holds a shorter one
        "- item\n\n  ```\n  nested   \n\n\n  ```\n",
        "    x = 1   \n\n\n\n    y = 2\t\n",  # indented code keeps interior blank lines
        "<pre>\nkeep   \n\n\n\nthis\n</pre>\n",
        "| Name    | Value   |\n|---------|---------|\n| a       | 1       |   \n",  # aligned
        "| a | b |\n| - | - |\n| `x  y` |   |  \n",
    ],
)
def test_code_html_and_table_lines_are_kept_exactly(verbatim: str) -> None:
    source = f"Intro   \n\n\n{verbatim}\n\n\nOutro   "
    result = sanitize_text(source)
    assert verbatim in result.text
    assert result.text.startswith("Intro\n\n")
    assert result.text.endswith("\n\nOutro")


def test_an_unclosed_fence_runs_to_the_end() -> None:
    source = "Intro\n\n```\nunclosed   \n\n\n\nstill code   "
    check(source, source, {})


@pytest.mark.parametrize(
    ("source", "expected", "counts"),
    [
        ("foo  \nbar", "foo\\\nbar", {"hard_breaks_normalized": 1}),
        ("foo\t   \nbar", "foo\\\nbar", {"hard_breaks_normalized": 1}),
        ("foo\\\nbar", "foo\\\nbar", {}),  # already a backslash break
        ("# Title  \ntext", "# Title\ntext", {"trailing_spaces_removed": 1}),
        ("- a  \n  b", "- a\\\n  b", {"hard_breaks_normalized": 1}),
        ("> a  \n> b", "> a\\\n> b", {"hard_breaks_normalized": 1}),
        ("Title  \nmore\n===", "Title\\\nmore\n===", {"hard_breaks_normalized": 1}),
        # kept: the backslash before the spaces is literal; adding one would escape it
        ("foo\\  \nbar", "foo\\  \nbar", {}),
        # kept: a backslash after `_` would make the `_` open emphasis
        ("_  \nfoo_", "_  \nfoo_", {}),
        # kept: the line end is inside a code span, raw HTML or a link title
        ("`code  \nspan` x", "`code  \nspan` x", {}),
        ('<span title="a  \nb"> x', '<span title="a  \nb"> x', {}),
        ('[a](/u "t  \nt") x', '[a](/u "t  \nt") x', {}),
        # kept: a reference label must keep its exact text to match the definition
        ("[a  \nb]\n\n[a b]: /u", "[a  \nb]\n\n[a b]: /u", {}),
    ],
)
def test_hard_breaks(source: str, expected: str, counts: dict[str, int]) -> None:
    check(source, expected, counts)
    trailing = re.compile(r"[ \t]+<br")
    assert RENDERER.render(expected) == trailing.sub("<br", RENDERER.render(source))


def test_blank_lines_after_an_empty_list_item_are_kept() -> None:
    # markdown-it ends the list after two blank lines here but not after one.
    source = "-\n\n\n- b\n"
    check(source, source, {})


@pytest.mark.parametrize(
    "text",
    [
        "\\.\n",  # psql's end-of-data marker on its own line
        "\\.",
        "C:\\Program Files\\iDempiere\\ and \\\\server\\share",
        "It's a \"test\" with 'quotes'",  # seed testQuotesPreserved
        "tab\tseparated\tvalues",
        "emoji 😀🎉 and 🧑🏽‍💻",
        "\u05e9\u05dc\u05d5\u05dd \u200fRTL\u200e",
        "日本語のテキスト",
        "a+b=c; 50% off; 100%; %ZZ; %20 in prose; 20%2B",
    ],
)
def test_text_that_must_not_change(text: str) -> None:
    check(text, text, {})


# --- rule 6: percent-decoding ------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected", "decoded"),
    [
        ("[x](http://a/b%20c)", "[x](<http://a/b c>)", 1),
        ('[x](http://a/b%20c "T")', '[x](<http://a/b c> "T")', 1),
        ("[x](<http://a/b%20c>)", "[x](<http://a/b c>)", 1),
        ("![i](img/caf%C3%A9.png)", "![i](img/café.png)", 1),
        ("[x](caf%c3%a9)", "[x](café)", 1),  # lower-case hex is the same URL
        ("[x](a+b%20c)", "[x](<a+b c>)", 1),  # '+' untouched
        ("[Seite](http://a/Stra%C3%9Fe%20Nr)", "[Seite](<http://a/Straße Nr>)", 1),
        ("<http://a/caf%C3%A9>", "<http://a/café>", 1),
        ("| [x](a%20b) | c |\n| - | - |\n", "| [x](<a b>) | c |\n| - | - |\n", 1),
        ("[x](%C3%A9%FF%20x)", "[x](<é%FF x>)", 1),  # the invalid byte stays encoded
        ("[x](a%C3%A9%20)", "[x](aé%20)", 1),  # a trailing space would be trimmed from the href
    ],
)
def test_link_targets_are_decoded(source: str, expected: str, decoded: int) -> None:
    check(source, expected, {"percent_decoded": decoded})
    assert hrefs(expected) == hrefs(source)


@pytest.mark.parametrize(
    "source",
    [
        "[x](a%2Fb%3Fc%23d%26e%3D)",  # reserved characters keep the URL's meaning
        "[x](100%25)",  # decoding %25 would not be idempotent
        "[x](a%2541)",
        "[x](a%FFb%C3)",  # not UTF-8
        "[x](a%0Ab%00)",  # controls
        "[x](a%E2%80%8Bb%C2%A0)",  # zero-width space and NBSP are invisible
        "<http://a/b%20c>",  # an autolink cannot hold a space
        "[x](http://caf%C3%A9.com/)",  # the host would be punycoded: another href
        "[x](e%CC%81)",  # NFC would change the decoded text and so the href
        "[x](\nb%20c)",  # `<b c>` at a line start could open an HTML block
        "<span> [x](a%20b)",  # an earlier `<` could pair with the new `>`
        "[x](a\\(%20)",  # escapes: the pointy form would change them
        '[x](/u "title%20stays")',
        "[x]: http://a/b%20c\n\n[x]",  # reference definitions are left alone
        "`[x](a%20b)` and\n\n```\n[x](a%20b)\n```",  # code
        "50% off, 100%, a+b, %ZZ, %20 and caf%C3%A9 in prose, then [x](a)",
    ],
)
def test_percent_escapes_that_stay(source: str) -> None:
    check(source, source, {})


# --- entities: decoded by the Markdown stage, left alone here ------------------------------


def test_entities_are_not_decoded() -> None:
    check("AT&amp;T &lt;x&gt;", "AT&amp;T &lt;x&gt;", {})


@pytest.mark.parametrize(
    ("fmt", "body"),
    [
        (SourceFormat.MARKDOWN, "Hello &amp; World &lt;test&gt; caf&eacute;"),
        (SourceFormat.HTML, "<p>Hello &amp; World &lt;test&gt; caf&eacute;</p>"),
        (
            SourceFormat.EDITORJS,
            '{"blocks":[{"type":"paragraph","data":{"text":'
            '"Hello &amp; World &lt;test&gt; caf&eacute;"}}]}',
        ),
    ],
)
def test_seed_html_entity_decode_is_done_by_the_markdown_stage(
    fmt: SourceFormat, body: str
) -> None:
    # The seed decodes entities in the sanitizer; here every converter decodes them, so
    # what reaches the sanitizer reads "Hello & World <test> café" and holds no entity.
    markdown = to_markdown(body, fmt).markdown
    assert "&amp;" not in markdown
    assert "&eacute;" not in markdown
    assert RENDERER.render(markdown) == "<p>Hello &amp; World &lt;test&gt; café</p>\n"
    assert sanitize_text(markdown).text == markdown


# --- all rules together ------------------------------------------------------------------


def test_a_realistic_wiki_page() -> None:
    source = (
        "\ufeff# Sales Order  \r\n"
        "\r\n"
        "Open the [Sales Order](https://wiki.idempiere.org/en/Sales%20Order) window.  \r\n"
        "Discounts: 50% off for a+b customers\u200b.\r\n"
        "\r\n\r\n\r\n"
        "| Field     | Column       |\r\n"
        "|-----------|--------------|\r\n"
        "| Order No  | `DocumentNo` |\r\n"
        "\r\n"
        "```sql\r\n"
        "SELECT *   \r\n"
        "  FROM C_Order\x00;\r\n"
        "```\r\n"
    )
    expected = (
        "# Sales Order\n"
        "\n"
        "Open the [Sales Order](<https://wiki.idempiere.org/en/Sales Order>) window.\\\n"
        "Discounts: 50% off for a+b customers.\n"
        "\n"
        "| Field     | Column       |\n"
        "|-----------|--------------|\n"
        "| Order No  | `DocumentNo` |\n"
        "\n"
        "```sql\n"
        "SELECT *   \n"
        "  FROM C_Order;\n"
        "```\n"
    )
    result = sanitize_text(source)
    assert result.text == expected
    assert result.counts == {
        "newlines_normalized": 15,
        "nul_removed": 1,
        "zero_width_removed": 2,
        "trailing_spaces_removed": 1,
        "hard_breaks_normalized": 1,
        "blank_lines_collapsed": 2,
        "percent_decoded": 1,
    }
    assert sanitize_text(expected) == SanitizeResult(expected, {})


# --- large inputs (their speed is a benchmark figure, not a test: wall-clock bounds flake) ----


def test_a_one_megabyte_line() -> None:
    line = ("Müller 50% off a+b C_Order 😀 [x](a) " * 30_000)[:1_000_000]
    assert sanitize_text(line).text == line
    assert sanitize_text(line + "   ").text == line  # trailing space: parsed, one inline token


def test_a_ten_megabyte_document_on_the_fast_path() -> None:
    unit = (
        "# Heading\n\nSome text about C_Order and [a link](http://wiki/Main_Page).\n"
        "Second line.\n\n```java\nint a;\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    )
    document = unit * (10_000_000 // len(unit))
    accented = document.replace("C_Order", "Ördér")
    for text in (document, accented):
        assert sanitize_text(text).text.split() == text.split()
