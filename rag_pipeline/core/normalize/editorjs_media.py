# pyright: standard
# Standard, not strict, for the reason editorjs.py gives: block data is arbitrary JSON.
"""Editor.js blocks that point elsewhere, as HTML: image, embed, link preview and attachment.

An image keeps its URL and caption as an `img`; the others become a paragraph with a link
labelled by the block's title or caption (the URL itself when it has none), so the address of
what the block shows stays in the text.
"""

from typing import Any

from bs4 import Tag
from bs4.element import NavigableString, PageElement

from rag_pipeline.core.normalize.editorjs_html import BlockHtml, object_field, string_field
from rag_pipeline.core.normalize.inline import fragment_text


def link_paragraph(html: BlockHtml, url: str, text: str, note: str = "") -> Tag | None:
    """A paragraph with a link to `url` labelled `text` (the URL itself when empty)."""
    paragraph = html.soup.new_tag("p")
    url = url.strip()
    if url:
        paragraph.append(html.plain("a", text or url, href=url))
    elif text:
        paragraph.append(NavigableString(text))
    if note and note != text:
        paragraph.append(NavigableString(f" ({note})"))
    return paragraph if paragraph.contents else None


def render_image(html: BlockHtml, data: dict[str, Any], where: str) -> list[PageElement]:
    """An image block as a paragraph with an `img` (or its caption alone, without a URL)."""
    file_value = data.get("file")
    url = ""
    if isinstance(file_value, dict):
        url = string_field(file_value, "url", f"{where} file")
    elif isinstance(file_value, str):
        url = file_value
    url = url or string_field(data, "url", where)
    caption = fragment_text(string_field(data, "caption", where))
    paragraph = html.soup.new_tag("p")
    if url.strip():
        paragraph.append(html.soup.new_tag("img", attrs={"src": url.strip(), "alt": caption}))
    elif caption:
        paragraph.append(NavigableString(caption))
    return [paragraph] if paragraph.contents else []


def render_embed(html: BlockHtml, data: dict[str, Any], where: str) -> list[PageElement]:
    """An embed block as a link to its source, labelled by its caption."""
    source = string_field(data, "source", where) or string_field(data, "embed", where)
    caption = fragment_text(string_field(data, "caption", where))
    paragraph = link_paragraph(html, source, caption)
    return [paragraph] if paragraph is not None else []


def render_link(html: BlockHtml, data: dict[str, Any], where: str) -> list[PageElement]:
    """A link tool block as a link labelled by its page title, then the page's description."""
    meta = object_field(data, "meta", where)
    meta_where = f"{where} meta"
    title = " ".join(string_field(meta, "title", meta_where).split())
    site = " ".join(string_field(meta, "site_name", meta_where).split())
    description = string_field(meta, "description", meta_where)
    url = string_field(data, "link", where)
    nodes: list[PageElement] = []
    paragraph = link_paragraph(html, url, title or site, site if title else "")
    if paragraph is not None:
        nodes.append(paragraph)
    if description.strip():
        nodes.append(html.plain("p", description))
    return nodes


def render_attaches(html: BlockHtml, data: dict[str, Any], where: str) -> list[PageElement]:
    """An attachment block as a link to the file, labelled by its title or file name."""
    file_info = object_field(data, "file", where)
    file_where = f"{where} file"
    name = string_field(file_info, "name", file_where)
    title = " ".join(string_field(data, "title", where).split())
    paragraph = link_paragraph(
        html, string_field(file_info, "url", file_where), title or name, name if title else ""
    )
    return [paragraph] if paragraph is not None else []
