# pyright: standard
# Standard, not strict, for the reason editorjs.py gives: block data is arbitrary JSON.
"""Editor.js text blocks as HTML: heading, paragraph, quote, code, delimiter, warning, raw HTML
and table.

Each renderer takes one block's `data` and returns the elements it shows, or none when the
block holds no text; a field of the wrong JSON type raises a `NormalizationError` naming it.
"""

from typing import Any

from bs4.element import NavigableString, PageElement

from rag_pipeline.core.normalize.document import NormalizationError
from rag_pipeline.core.normalize.editorjs_html import BlockHtml, describe, has_content, string_field


def render_header(html: BlockHtml, data: dict[str, Any], where: str) -> list[PageElement]:
    """A heading block as `h1`…`h6` (level 2 when it has none)."""
    level_value = data.get("level")
    level = 2
    if isinstance(level_value, int) and not isinstance(level_value, bool):
        level = level_value
    elif isinstance(level_value, str) and level_value.strip().isdigit():
        level = int(level_value)
    heading = html.tag(f"h{max(1, min(6, level))}", string_field(data, "text", where))
    return [heading] if heading.get_text().strip() else []


def render_paragraph(html: BlockHtml, data: dict[str, Any], where: str) -> list[PageElement]:
    """A paragraph block as `p`."""
    paragraph = html.tag("p", string_field(data, "text", where))
    return [paragraph] if has_content(paragraph) else []


def render_quote(html: BlockHtml, data: dict[str, Any], where: str) -> list[PageElement]:
    """A quote block as a `blockquote`, its caption a last paragraph after a dash."""
    quote = html.soup.new_tag("blockquote")
    text = html.tag("p", string_field(data, "text", where))
    if has_content(text):
        quote.append(text)
    caption = html.tag("p", string_field(data, "caption", where))
    if has_content(caption):
        caption.insert(0, NavigableString("— "))
        quote.append(caption)
    return [quote] if quote.contents else []


def render_code(html: BlockHtml, data: dict[str, Any], where: str) -> list[PageElement]:
    """A code block as `pre > code`, with its language as a `language-` class."""
    code = string_field(data, "code", where)
    if not code.strip():
        return []
    language = string_field(data, "language", where) or string_field(data, "lang", where)
    attrs = {"class": f"language-{language.strip()}"} if language.strip() else {}
    pre = html.soup.new_tag("pre")
    pre.append(html.plain("code", code, **attrs))
    return [pre]


def render_delimiter(html: BlockHtml, data: dict[str, Any], where: str) -> list[PageElement]:
    """A delimiter block as `hr`."""
    return [html.soup.new_tag("hr")]


def render_warning(html: BlockHtml, data: dict[str, Any], where: str) -> list[PageElement]:
    """A warning or alert block as a quoted paragraph led by its title in bold."""
    title = html.tag("strong", string_field(data, "title", where))
    # editorjs-alert saves `message`; its README shows `text`: accept both.
    message_key = "message" if data.get("message") is not None else "text"
    message = html.tag("span", string_field(data, message_key, where))
    paragraph = html.soup.new_tag("p")
    if has_content(title):
        paragraph.append(title)
        paragraph.append(NavigableString(" "))
    for node in list(message.contents):
        paragraph.append(node)
    if not has_content(paragraph):
        return []
    quote = html.soup.new_tag("blockquote")
    quote.append(paragraph)
    return [quote]


def render_raw(html: BlockHtml, data: dict[str, Any], where: str) -> list[PageElement]:
    """A raw HTML block as a `div` holding its HTML."""
    return [html.tag("div", string_field(data, "html", where))]


def render_table(html: BlockHtml, data: dict[str, Any], where: str) -> list[PageElement]:
    """A table block as a `table`, its first row the head when `withHeadings` says so."""
    content = data.get("content")
    if content is None:
        return []
    if not isinstance(content, list):
        raise NormalizationError(
            f"{where}: 'content' must be a list of rows, but it is {describe(content)}"
        )
    with_headings = bool(data.get("withHeadings", data.get("withHeading", False)))
    table = html.soup.new_tag("table")
    body = html.soup.new_tag("tbody")
    for row_index, row in enumerate(content):
        if not isinstance(row, list):
            raise NormalizationError(
                f"{where}: row {row_index} must be a list of cells, but it is {describe(row)}"
            )
        heading = with_headings and row_index == 0
        tr = html.soup.new_tag("tr")
        for cell_index, cell in enumerate(row):
            cell_where = f"{where} row {row_index} cell {cell_index}"
            cell_html = string_field({"value": cell}, "value", cell_where)
            tr.append(html.tag("th" if heading else "td", cell_html))
        if heading:
            head = html.soup.new_tag("thead")
            head.append(tr)
            table.append(head)
        elif tr.contents:
            body.append(tr)
    if body.contents:
        table.append(body)
    return [table] if table.get_text().strip() else []
