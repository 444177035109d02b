# pyright: standard
# Checked at pyright's standard level, not strict: Editor.js saved data is arbitrary JSON, so
# strict mode would flag every value narrowed from it as partly unknown and ask for casts that
# check nothing.
"""Editor.js saved data → an HTML tree for the shared HTML converter.

Every block becomes the HTML element a renderer would show (a heading, a list, a table …);
the text fields, which Editor.js stores as HTML, are parsed one field at a time into that tree.
The tree then goes through the same cleaning and conversion as an HTML document, so an article
comes out the same whether it was written in Editor.js or in HTML.

The block `type` is the integrator's tool key, not a fixed name ("List", "linkTool", "codeBox"),
so it is matched case-insensitively against known names and aliases. A block of an unknown type
keeps its text: a recognisable shape (`code`, list `items`, table `content`) is rendered as
such, anything else as the string values of its `data`, in order.

This module reads the document and walks its blocks (columns included); the renderers of
the block families live in `editorjs_text`, `editorjs_lists` and `editorjs_media`.
"""

import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from bs4 import BeautifulSoup, Tag
from bs4.element import PageElement

from rag_pipeline.core.json_limits import JSONTooDeepError, loads_bounded
from rag_pipeline.core.normalize.document import NormalizationError
from rag_pipeline.core.normalize.editorjs_html import BlockHtml, describe, has_content
from rag_pipeline.core.normalize.editorjs_lists import render_checklist, render_list
from rag_pipeline.core.normalize.editorjs_media import (
    link_paragraph,
    render_attaches,
    render_embed,
    render_image,
    render_link,
)
from rag_pipeline.core.normalize.editorjs_text import (
    render_code,
    render_delimiter,
    render_header,
    render_paragraph,
    render_quote,
    render_raw,
    render_table,
    render_warning,
)

# Columns inside columns inside …: a real layout never nests this deep.
_MAX_COLUMN_DEPTH = 16
# Nested lists are 2 levels of JSON each and are flattened below a depth when rendered (a
# 200-level list is still read); deeper than this is refused before anything walks it.
_MAX_JSON_DEPTH = 800

_KINDS = {
    "header": "header",
    "heading": "header",
    "paragraph": "paragraph",
    "text": "paragraph",
    "list": "list",
    "nestedlist": "list",
    "checklist": "checklist",
    "quote": "quote",
    "blockquote": "quote",
    "code": "code",
    "codebox": "code",
    "codecup": "code",
    "delimiter": "delimiter",
    "divider": "delimiter",
    "warning": "warning",
    "alert": "warning",
    "table": "table",
    "image": "image",
    "simpleimage": "image",
    "embed": "embed",
    "linktool": "link",
    "link": "link",
    "attaches": "attaches",
    "attachment": "attaches",
    "raw": "raw",
    "html": "raw",
    "columns": "columns",
}

# Keys of unknown blocks whose string values style the block rather than say anything.
_PRESENTATION_KEYS = frozenset(
    {
        "id",
        "alignment",
        "align",
        "style",
        "theme",
        "variant",
        "color",
        "textColor",
        "backgroundColor",
        "counterType",
        "class",
        "className",
    }
)

_Renderer = Callable[[BlockHtml, dict[str, Any], str], list[PageElement]]
# The renderer of each kind but "columns", whose blocks are walked like the document's.
_RENDERERS: dict[str, _Renderer] = {
    "header": render_header,
    "paragraph": render_paragraph,
    "list": render_list,
    "checklist": render_checklist,
    "quote": render_quote,
    "code": render_code,
    "delimiter": render_delimiter,
    "warning": render_warning,
    "table": render_table,
    "image": render_image,
    "embed": render_embed,
    "link": render_link,
    "attaches": render_attaches,
    "raw": render_raw,
}


def _kind_of(block_type: str) -> str | None:
    return _KINDS.get(block_type.strip().lower().replace("-", "").replace("_", ""))


def _is_url(value: str) -> bool:
    return value.startswith(("http://", "https://")) and not any(c.isspace() for c in value)


def load_document(body: str) -> dict[str, Any]:
    """Parse and check the top level of an Editor.js body.

    Args:
        body: The saved JSON; a JSON string that itself holds the JSON (double-encoded, as in
            some `K_Entry.TextMsg` rows) is accepted. A blank body is an empty document.

    Returns:
        The document object; its `blocks` is a list.

    Raises:
        NormalizationError: The body is not JSON, or not an object with a `blocks` list.
    """
    if not body.strip():
        return {"blocks": []}
    document: Any
    try:
        document = loads_bounded(body, max_depth=_MAX_JSON_DEPTH)
        if isinstance(document, str) and document.lstrip().startswith(("{", "[")):
            document = loads_bounded(document, max_depth=_MAX_JSON_DEPTH)
    except JSONTooDeepError as error:
        raise NormalizationError(f"Editor.js body is nested too deeply: {error}") from error
    except json.JSONDecodeError as error:
        raise NormalizationError(
            f"Editor.js body is not valid JSON: {error.msg} at line {error.lineno} "
            f"column {error.colno}"
        ) from error
    if not isinstance(document, dict):
        raise NormalizationError(
            "Editor.js body must be a JSON object with a 'blocks' list, "
            f"but it is {describe(document)}"
        )
    if "blocks" not in document:
        keys = ", ".join(sorted(str(key) for key in document)) or "none"
        hint = ""
        if "type" in document:
            hint = "; it looks like a single block: wrap it as {'blocks': [<block>]}"
        raise NormalizationError(
            f"Editor.js document has no 'blocks' list (its keys are: {keys}){hint}"
        )
    if not isinstance(document["blocks"], list):
        raise NormalizationError(
            f"Editor.js 'blocks' must be a list, but it is {describe(document['blocks'])}"
        )
    return document


class _TreeBuilder(BlockHtml):
    """Builds the HTML tree of one document and counts its block types."""

    def __init__(self) -> None:
        super().__init__()
        self.block_counts: Counter[str] = Counter()
        self.unknown_types: set[str] = set()

    def render_blocks(self, blocks: list[Any], parent: Tag, path: str, depth: int) -> None:
        """Append the elements of `blocks` to `parent`.

        Raises:
            NormalizationError: A block is not an object, has no usable `type`, or a field of a
                known block has the wrong JSON type; the message names the block.
        """
        for index, block in enumerate(blocks):
            where = f"{path}block {index}"
            if not isinstance(block, dict):
                raise NormalizationError(f"{where} must be an object, but it is {describe(block)}")
            block_type = block.get("type")
            if block_type is None:
                raise NormalizationError(f"{where} has no 'type'")
            if not isinstance(block_type, str) or not block_type.strip():
                raise NormalizationError(
                    f"{where} has a 'type' that is not a non-empty string: {block_type!r}"
                )
            where = f"{where} ({block_type})"
            data = block.get("data")
            if data is None:
                data = {}  # a delimiter may be saved without data
            if not isinstance(data, dict):
                raise NormalizationError(
                    f"{where}: 'data' must be an object, but it is {describe(data)}"
                )
            self.block_counts[block_type] += 1
            kind = _kind_of(block_type)
            if kind is None:
                self.unknown_types.add(block_type)
                nodes = self._unknown(data, where)
            elif kind == "columns":
                nodes = self._columns(data, where, depth)
            else:
                nodes = _RENDERERS[kind](self, data, where)
            for node in nodes:
                parent.append(node)

    def _columns(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        columns = data.get("cols")
        if columns is None:
            return []
        if not isinstance(columns, list):
            raise NormalizationError(
                f"{where}: 'cols' must be a list, but it is {describe(columns)}"
            )
        if depth >= _MAX_COLUMN_DEPTH:
            raise NormalizationError(
                f"{where}: columns are nested more than {_MAX_COLUMN_DEPTH} deep"
            )
        nodes: list[PageElement] = []
        for index, column in enumerate(columns):
            column_where = f"{where} column {index}"
            blocks = column.get("blocks") if isinstance(column, dict) else column
            if not isinstance(blocks, list):
                raise NormalizationError(
                    f"{column_where} must be an Editor.js document with a 'blocks' list"
                )
            container = self.soup.new_tag("div")
            self.render_blocks(blocks, container, f"{column_where} › ", depth + 1)
            nodes.append(container)
        return nodes

    def _unknown(self, data: dict[str, Any], where: str) -> list[PageElement]:
        # A known shape under an unknown name renders as that shape; if the shape turns out
        # not to fit, the string values are kept instead.
        shapes: list[tuple[bool, _Renderer]] = [
            (isinstance(data.get("code"), str), render_code),
            (_is_list_of_items(data.get("items")), render_list),
            (_is_list_of_rows(data.get("content")), render_table),
        ]
        for fits, render in shapes:
            if fits:
                try:
                    return render(self, data, where)
                except NormalizationError:
                    break
        nodes: list[PageElement] = []
        for value in _strings(data):
            if _is_url(value):
                paragraph = link_paragraph(self, value, "")
                if paragraph is not None:
                    nodes.append(paragraph)
            else:
                paragraph = self.tag("p", value)
                if has_content(paragraph):
                    nodes.append(paragraph)
        return nodes


def _is_list_of_items(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(item, str)
            or (isinstance(item, dict) and ("content" in item or "text" in item))
            for item in value
        )
    )


def _is_list_of_rows(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(row, list) for row in value)


def _strings(value: Any) -> Iterator[str]:
    """The non-blank strings of a JSON value in document order, skipping presentation keys."""
    if isinstance(value, str):
        if value.strip():
            yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _PRESENTATION_KEYS:
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def editorjs_to_tree(body: str) -> tuple[BeautifulSoup, dict[str, Any]]:
    """Build the HTML tree of an Editor.js document.

    Args:
        body: Editor.js saved data (see `load_document`).

    Returns:
        The tree, ready for `html.prepare_tree` and `html.convert_tree`, and the metadata:
        `block_counts` (per `type` as written, nested blocks included), `unknown_block_types`
        (sorted) and, when the document says, `editorjs_version`.

    Raises:
        NormalizationError: The body or one of its blocks is malformed; the message says where.
    """
    document = load_document(body)
    builder = _TreeBuilder()
    builder.render_blocks(document["blocks"], builder.soup, "", 0)
    metadata: dict[str, Any] = {
        "block_counts": dict(builder.block_counts),
        "unknown_block_types": sorted(builder.unknown_types),
    }
    version = document.get("version")
    if isinstance(version, str):
        metadata["editorjs_version"] = version
    return builder.soup, metadata
