"""Editor.js saved data → canonical Markdown (rag_pipeline.core.normalize)."""

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rag_pipeline.core.normalize import (
    MarkdownDocument,
    NormalizationError,
    SourceFormat,
    to_markdown,
)
from rag_pipeline_tests.test_core_normalize_support import (
    EDITORJS_FIXTURES,
    Structure,
    assert_golden,
    html_text,
    requires_shared,
    shared_files,
    structure,
)

JSON_STRUCTURE_WORDS = ('"blocks"', '"type":', '"data"')


def convert(blocks: list[dict[str, Any]], **kwargs: Any) -> MarkdownDocument:
    return to_markdown(json.dumps({"blocks": blocks}), SourceFormat.EDITORJS, **kwargs)


def md(*blocks: dict[str, Any], **kwargs: Any) -> str:
    return convert(list(blocks), **kwargs).markdown


def block(block_type: str, **data: Any) -> dict[str, Any]:
    return {"type": block_type, "data": data}


# -- conformance on the real fixtures -------------------------------------------------------


def _document_of(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text(encoding="utf-8"))
    # The plugin README examples are single blocks: wrap them into a document.
    return document if "blocks" in document else {"blocks": [document]}


def _walk_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    flat: list[dict[str, Any]] = []
    for item in blocks:
        flat.append(item)
        if item["type"].lower() == "columns":
            for column in item["data"]["cols"]:
                flat.extend(_walk_blocks(column["blocks"]))
    return flat


def _expected_list(items: list[Any], depth: int, checklist: bool, acc: Counter[str]) -> None:
    for item in items:
        if isinstance(item, str):
            content, children, checked = item, [], False
        else:
            content = item.get("content", item.get("text", ""))
            children = item.get("items", [])
            checked = bool(item.get("meta", {}).get("checked", item.get("checked", False)))
        if not html_text(content) and not children:
            continue
        acc["items"] += 1
        acc["depth"] = max(acc["depth"], depth)
        if checklist and html_text(content):
            acc["checked" if checked else "unchecked"] += 1
        _expected_list(children, depth + 1, checklist, acc)


def _expected_structure(document: dict[str, Any]) -> Structure:
    """What the output must show, computed from the JSON independently of the converter."""
    expected = Structure()
    lists: Counter[str] = Counter()
    for item in _walk_blocks(document["blocks"]):
        kind, data = item["type"].lower(), item.get("data") or {}
        if kind == "header":
            expected.headings.append((data["level"], html_text(data["text"])))
        elif kind in ("list", "checklist"):
            style = data.get("style", "checklist" if kind == "checklist" else "")
            checklist = style == "checklist" or (
                style == "" and any(isinstance(i, dict) and "checked" in i for i in data["items"])
            )
            _expected_list(data["items"], 1, checklist, lists)
        elif kind in ("code", "codebox"):
            code = data["code"]
            expected.code_blocks.append(code if code.endswith("\n") else code + "\n")
        elif kind == "table":
            rows = [[html_text(cell) for cell in row] for row in data["content"]]
            width = max(len(row) for row in rows)
            rows = [row + [""] * (width - len(row)) for row in rows]
            if not data.get("withHeadings"):
                rows.insert(0, [""] * width)
            expected.tables.append(rows)
    expected.list_items = lists["items"]
    expected.list_depth = lists["depth"]
    expected.checked, expected.unchecked = lists["checked"], lists["unchecked"]
    return expected


EDITORJS_FILES = shared_files(EDITORJS_FIXTURES, "*/*.json")


@requires_shared
def test_all_fixture_folders_are_covered() -> None:
    folders = {path.parent.name for path in EDITORJS_FILES}
    assert folders == {"real_documents", "plugin_readme_examples", "third_party"}
    assert len(EDITORJS_FILES) == 25


@requires_shared
@pytest.mark.parametrize("path", EDITORJS_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_matches_golden_and_keeps_structure(path: Path) -> None:
    document = _document_of(path)
    result = to_markdown(json.dumps(document), SourceFormat.EDITORJS)

    assert_golden(f"editorjs/{path.parent.name}__{path.stem}.md", result.markdown)
    assert result.markdown.endswith("\n")
    assert not result.markdown.endswith("\n\n")
    for word in JSON_STRUCTURE_WORDS:
        assert word not in result.markdown

    actual, expected = structure(result.markdown), _expected_structure(document)
    assert actual.headings == expected.headings
    assert actual.list_items == expected.list_items
    assert actual.list_depth == expected.list_depth
    assert (actual.checked, actual.unchecked) == (expected.checked, expected.unchecked)
    assert actual.tables == expected.tables
    assert actual.code_blocks == expected.code_blocks

    counts = Counter(item["type"] for item in _walk_blocks(document["blocks"]))
    assert result.metadata["block_counts"] == dict(counts)
    json.dumps(result.metadata)  # must be JSON-serialisable


@requires_shared
def test_react_renderer_document_lists_its_unknown_blocks_and_keeps_their_text() -> None:
    path = EDITORJS_FIXTURES / "real_documents" / "editorjs_react_renderer_testData.json"
    result = to_markdown(path.read_text(encoding="utf-8"), SourceFormat.EDITORJS)
    assert result.metadata["unknown_block_types"] == ["avatar", "personality", "video"]
    assert result.metadata["editorjs_version"] == "2.14.0"
    # personality: every string of its data, URLs as links
    assert "Elon Musk\n" in result.markdown
    assert "<https://twitter.com/elonmusk>" in result.markdown
    # video (unknown) keeps caption and file URL; codeBox (alias of code) keeps its language
    assert "An aweomse video" in result.markdown
    assert "2019-11-05--test-post-video-upload-0.mp4" in result.markdown
    assert "```css\n.codeBoxTextArea{\n" in result.markdown


@requires_shared
def test_list_index_has_every_list_generation() -> None:
    path = EDITORJS_FIXTURES / "real_documents" / "list_index.json"
    markdown = to_markdown(path.read_text(encoding="utf-8"), SourceFormat.EDITORJS).markdown
    # v2 ordered list with meta.start = 2, four levels, and an item with empty content
    assert markdown.startswith("2. Canon\n   1. Fisheye\n      1. Canon 15mm f/2.8\n")
    assert "\n3. 1. Canon 75-300mm f/4-5.6\n" in markdown
    # legacy string items with style checklist, then old checklist data under type "List":
    # two lists in a row must stay two lists (different bullet), not merge into a loose one
    assert "- [ ] This is old List tool data\n- [ ] That would be displayed\n" in markdown
    assert "* [x] This is Checklist tool data\n* [ ] That would be displayed\n" in markdown


# -- block by block ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "prefix"), [(1, "# "), (3, "### "), (6, "###### "), ("4", "#### ")]
)
def test_header_levels(level: Any, prefix: str) -> None:
    assert md(block("header", text="Title", level=level)) == f"{prefix}Title\n"


@pytest.mark.parametrize(("level", "prefix"), [(0, "# "), (9, "###### "), (None, "## ")])
def test_header_level_out_of_range_is_clamped_or_defaulted(level: Any, prefix: str) -> None:
    assert md(block("header", text="Title", level=level)) == f"{prefix}Title\n"


def test_empty_header_and_paragraph_produce_nothing() -> None:
    assert md(block("header", text=" <br> ", level=2), block("paragraph", text="&nbsp;")) == ""


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        ("<b>bold</b> and <strong>strong</strong>", "**bold** and **strong**"),
        ("<i>it</i> and <em>em</em>", "*it* and *em*"),
        ('<a href="https://idempiere.org/">site</a>', "[site](https://idempiere.org/)"),
        ('<code class="inline-code">C_Order</code>', "`C_Order`"),
        (
            '<mark class="cdx-marker">marked</mark> <u class="cdx-underline">under</u>',
            "marked under",
        ),
        ("<s>gone</s>", "~~gone~~"),
        ("one<br>two", "one\\\ntwo"),
        ("<b>bold <i>and italic</i></b>", "**bold *and italic***"),
        ("a&nbsp;b &lt;tag&gt; &amp; &quot;q&quot;", 'a\u00a0b \\<tag> & "q"'),
        ("<code>a`b</code>", "`` a`b ``"),
    ],
)
def test_inline_html_in_text(html: str, expected: str) -> None:
    assert md(block("paragraph", text=html)) == expected + "\n"


@pytest.mark.parametrize(
    "text",
    [
        "1. not a list",
        "# not a heading",
        "- not a bullet",
        "> not a quote",
        "*not emphasis* and _not either_",
        "[not](a-link) and ![not](an-image)",
        "`not code`",
        "| not | a | table |",
        "~~not struck~~",
        "a &amp;amp; entity-like text",
        "===",
        "---",
    ],
)
def test_markdown_special_characters_in_text_stay_text(text: str) -> None:
    markdown = md(block("paragraph", text=text))
    parsed = structure(markdown)
    # One paragraph whose visible text is exactly what the author typed (entities decoded
    # once): had any marker been read as emphasis, a link or code, it would be missing.
    assert parsed.paragraphs == [html_text(text)]
    assert not parsed.headings
    assert not parsed.list_items
    assert not parsed.tables
    assert not parsed.thematic_breaks


def test_list_of_plain_strings_v1() -> None:
    result = md(block("list", style="unordered", items=["One", "<b>Two</b>"]))
    assert result == "- One\n- **Two**\n"
    assert md(block("list", style="ordered", items=["One", "Two"])) == "1. One\n2. Two\n"


def test_nested_list_plugin_items_without_meta() -> None:
    items = [{"content": "Apples", "items": [{"content": "Red", "items": []}]}]
    assert md(block("list", style="unordered", items=items)) == "- Apples\n  - Red\n"


def test_list_v2_ordered_with_start_and_nested_levels() -> None:
    leaf = {"content": "four", "meta": {}, "items": []}
    third = {"content": "three", "meta": {}, "items": [leaf]}
    second = {"content": "two", "meta": {}, "items": [third]}
    items = [{"content": "one", "meta": {}, "items": [second]}, {"content": "x", "items": []}]
    result = md(block("list", style="ordered", meta={"start": 7}, items=items))
    assert result == "7. one\n   1. two\n      1. three\n         1. four\n8. x\n"


def test_list_v2_unordered_five_levels_indentation() -> None:
    item: dict[str, Any] = {"content": "level 5", "meta": {}, "items": []}
    for level in range(4, 0, -1):
        item = {"content": f"level {level}", "meta": {}, "items": [item]}
    result = md(block("list", style="unordered", items=[item]))
    assert result == "".join(f"{'  ' * n}- level {n + 1}\n" for n in range(5))
    assert structure(result).list_depth == 5


def test_list_v2_checklist_with_meta_checked_at_every_level() -> None:
    items = [
        {
            "content": "Apples",
            "meta": {"checked": False},
            "items": [{"content": "Red", "meta": {"checked": True}, "items": []}],
        },
        {"content": "Pears", "meta": {"checked": True}, "items": []},
    ]
    result = md(block("list", style="checklist", items=items))
    assert result == "- [ ] Apples\n  - [x] Red\n- [x] Pears\n"


def test_checklist_tool_and_old_checklist_data_under_list() -> None:
    items = [{"text": "Done", "checked": True}, {"text": "Todo", "checked": False}]
    assert md(block("checklist", items=items)) == "- [x] Done\n- [ ] Todo\n"
    assert md(block("List", items=items)) == "- [x] Done\n- [ ] Todo\n"


def test_list_item_with_empty_content_keeps_its_children() -> None:
    items = [{"content": "", "items": [{"content": "child", "items": []}]}, "sibling"]
    result = md(block("list", style="unordered", items=items))
    assert result == "- - child\n- sibling\n"
    assert structure(result).list_items == 3


def test_very_deep_list_is_flattened_below_a_limit_but_keeps_every_item() -> None:
    item: dict[str, Any] = {"content": "word199", "items": []}
    for level in range(198, -1, -1):
        item = {"content": f"word{level}", "items": [item]}
    result = md(block("list", style="unordered", items=[item]))
    for level in range(200):
        assert f"word{level}\n" in result
    assert structure(result).list_depth == 8
    assert structure(result).list_items == 200


def test_quote_with_and_without_caption() -> None:
    quote = block("quote", text="Stay <i>hungry</i>", caption="Steve", alignment="left")
    assert md(quote) == "> Stay *hungry*\n>\n> — Steve\n"
    assert md(block("quote", text="Alone", caption="")) == "> Alone\n"


def test_code_is_kept_byte_for_byte() -> None:
    code = "if (a < b && c > d) {\n\treturn `x`;   \n}\n\n  // &lt; stays &lt;\n```\nfence"
    result = md(block("code", code=code))
    assert structure(result).code_blocks == [code + "\n"]
    assert "&lt; stays &lt;" in result
    assert "\treturn `x`;   \n" in result


def test_code_language_from_codebox_and_unknown_code_blocks() -> None:
    assert md(block("codeBox", code="a {}", language="css")) == "```css\na {}\n```\n"
    result = convert([block("mermaid", code="graph TD; A-->B")])
    assert result.markdown == "```\ngraph TD; A-->B\n```\n"
    assert result.metadata["unknown_block_types"] == ["mermaid"]


def test_delimiter_with_empty_or_missing_data() -> None:
    assert md(block("delimiter"), {"type": "delimiter"}, block("paragraph", text="x")) == (
        "___\n\n___\n\nx\n"
    )


def test_warning_and_alert() -> None:
    warning = block("warning", title="Note:", message="Be <b>careful</b>.")
    assert md(warning) == "> **Note:** Be **careful**.\n"
    assert md(block("warning", title="", message="Only a message")) == "> Only a message\n"
    # editorjs-alert saves `message`; its README shows `text`: both are kept
    assert md(block("alert", type="danger", message="Saved as message")) == "> Saved as message\n"
    assert md(block("alert", type="info", text="Shown as text")) == "> Shown as text\n"


def test_table_with_headings_html_cells_ragged_rows_and_pipes() -> None:
    content = [["Name", "<b>Value</b>"], ["a | b", "<code>x|y</code>", "extra"], ["only"]]
    result = md(block("table", withHeadings=True, content=content))
    assert result == (
        "| Name | **Value** |  |\n| -- | -- | -- |\n| a \\| b | `x\\|y` | extra |\n| only |  |  |\n"
    )
    assert structure(result).tables == [
        [["Name", "Value", ""], ["a | b", "x|y", "extra"], ["only", "", ""]]
    ]


def test_table_without_headings_keeps_every_row_as_data() -> None:
    result = md(block("table", withHeadings=False, content=[["a", "b"], ["c", "d<br>e"]]))
    assert result == "|  |  |\n| -- | -- |\n| a | b |\n| c | d e |\n"


def test_old_table_tool_cells_are_html() -> None:
    cell = '<div class="tc-table__area"><div class="tc-table__inp">Jack&nbsp;</div></div>'
    result = md(block("table", content=[[cell, "51"]]))
    assert structure(result).tables == [[["", ""], ["Jack", "51"]]]


def test_image_and_simple_image() -> None:
    url = "https://cdn.example.com/a.png?alt=media&token=1"
    image = block("image", file={"url": url, "size": 3}, caption="A <b>caption</b>")
    assert md(image) == f"![A caption]({url})\n"
    assert md(block("image", url=url, caption="")) == f"![]({url})\n"
    relative = block("image", url="assets/codex2x.png", caption="Logo")
    assert md(relative, base_url="https://editorjs.io/example/") == (
        "![Logo](https://editorjs.io/example/assets/codex2x.png)\n"
    )
    assert md(block("image", caption="No URL at all")) == "No URL at all\n"


def test_embed_link_tool_and_attaches() -> None:
    embed = block(
        "embed", service="youtube", source="https://youtu.be/x", caption="Demo <i>video</i>"
    )
    assert md(embed) == "[Demo video](https://youtu.be/x)\n"
    assert md(block("embed", source="https://youtu.be/x", caption="")) == "<https://youtu.be/x>\n"
    meta = {"title": "CodeX", "site_name": "CodeX site", "description": "Club of devs."}
    assert md(block("linkTool", link="https://codex.so", meta=meta)) == (
        "[CodeX](https://codex.so) (CodeX site)\n\nClub of devs.\n"
    )
    attaches = block(
        "attaches", file={"url": "https://f.example/x.pdf", "name": "x.pdf"}, title="Spec"
    )
    assert md(attaches) == "[Spec](https://f.example/x.pdf) (x.pdf)\n"
    assert md(block("attaches", file={"url": "https://f.example/x.pdf", "name": "x.pdf"})) == (
        "[x.pdf](https://f.example/x.pdf)\n"
    )


def test_raw_html_goes_through_the_html_converter() -> None:
    html = "<h3>Raw</h3><script>alert(1)</script><ul><li>one</li><li>two</li></ul>"
    assert md(block("raw", html=html)) == "### Raw\n\n- one\n- two\n"


def test_columns_are_nested_documents() -> None:
    columns = block(
        "columns",
        cols=[
            {"blocks": [block("header", text="Left", level=3)]},
            {"time": 1, "blocks": [block("paragraph", text="Right")]},
        ],
    )
    result = convert([columns])
    assert result.markdown == "### Left\n\nRight\n"
    assert result.metadata["block_counts"] == {"columns": 1, "header": 1, "paragraph": 1}


def test_type_names_are_matched_case_insensitively() -> None:
    result = convert(
        [block("Header", text="H", level=2), block("simple-image", url="https://x.example/i.png")]
    )
    assert result.markdown == "## H\n\n![](https://x.example/i.png)\n"
    assert result.metadata["unknown_block_types"] == []


def test_unknown_block_keeps_its_strings_never_json() -> None:
    data = {
        "name": "Elon <b>Musk</b>",
        "details": {"role": "founder", "tags": ["space", "cars"], "style": "dark"},
        "photo": "https://example.com/p.jpg",
        "count": 3,
    }
    result = convert([block("personality", **data)])
    assert result.markdown == (
        "Elon **Musk**\n\nfounder\n\nspace\n\ncars\n\n<https://example.com/p.jpg>\n"
    )
    assert result.metadata["unknown_block_types"] == ["personality"]
    for word in JSON_STRUCTURE_WORDS:
        assert word not in result.markdown


def test_unknown_block_with_list_shape() -> None:
    result = md(block("faq-list", items=["Question one", "Question two"]))
    assert result == "- Question one\n- Question two\n"


def test_double_encoded_json_body_is_accepted() -> None:
    inner = json.dumps({"blocks": [block("paragraph", text="Hello")]})
    assert to_markdown(json.dumps(inner), SourceFormat.EDITORJS).markdown == "Hello\n"


def test_empty_documents() -> None:
    for body in ("", "   \n", '{"blocks": []}', '{"time": 1, "blocks": [], "version": "2.8"}'):
        result = to_markdown(body, SourceFormat.EDITORJS)
        assert result.markdown == ""
        assert result.metadata["block_counts"] == {}


# -- malformed input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("{not json", "not valid JSON"),
        (
            "Plain text that was saved in the wrong mode",
            "not valid JSON: Expecting value at line 1",
        ),
        ('"{\\"blocks\\": ["', "not valid JSON"),
        ("[]", "must be a JSON object with a 'blocks' list, but it is a list"),
        ("42", "but it is a number"),
        ('{"time": 1, "version": "2.8"}', "no 'blocks' list (its keys are: time, version)"),
        ('{"type": "paragraph", "data": {}}', "looks like a single block"),
        ('{"blocks": {"type": "paragraph"}}', "'blocks' must be a list, but it is an object"),
        ('{"blocks": ["text"]}', "block 0 must be an object, but it is a string"),
        ('{"blocks": [{"type": "paragraph"}, {"data": {}}]}', "block 1 has no 'type'"),
        ('{"blocks": [{"type": 5, "data": {}}]}', "block 0 has a 'type' that is not a non-empty"),
        ('{"blocks": [{"type": " ", "data": {}}]}', "not a non-empty string"),
        ('{"blocks": [{"type": "paragraph", "data": []}]}', "block 0 (paragraph): 'data' must be"),
        (
            '{"blocks": [{"type": "header", "data": {"text": ["a"]}}]}',
            "block 0 (header): 'text' must be a string, but it is a list",
        ),
        ('{"blocks": [{"type": "list", "data": {"items": "a"}}]}', "'items' must be a list"),
        (
            '{"blocks": [{"type": "list", "data": {"items": [["a"]]}}]}',
            "block 0 (list) item 0 must be a string or an object, but it is a list",
        ),
        ('{"blocks": [{"type": "table", "data": {"content": "x"}}]}', "'content' must be a list"),
        (
            '{"blocks": [{"type": "table", "data": {"content": [["a"], "b"]}}]}',
            "row 1 must be a list of cells",
        ),
        (
            '{"blocks": [{"type": "columns", "data": {"cols": [{"blocks": [{"data": {}}]}]}}]}',
            "block 0 (columns) column 0 › block 0 has no 'type'",
        ),
        ('{"blocks": [{"type": "columns", "data": {"cols": [3]}}]}', "column 0 must be"),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_malformed_input_raises_with_a_precise_reason(body: str, reason: str) -> None:
    with pytest.raises(NormalizationError) as raised:
        to_markdown(body, SourceFormat.EDITORJS)
    assert reason in str(raised.value)
    assert isinstance(raised.value, ValueError)
