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
"""

import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from bs4 import BeautifulSoup, Tag
from bs4.element import NavigableString, PageElement

from rag_pipeline.core.normalize.document import NormalizationError
from rag_pipeline.core.normalize.inline import fragment_text, parse_fragment

# Columns inside columns inside …: a real layout never nests this deep.
_MAX_COLUMN_DEPTH = 16
# Deeper list levels are attached to this one. markdown-it's presets other than "default"
# stop parsing at 20 levels of block nesting (a list level costs two), silently dropping what
# is deeper; 8 levels keep the output safe for any downstream parser, and no reader follows
# more indentation than that.
_MAX_LIST_DEPTH = 8

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


def _describe(value: Any) -> str:
    """How a JSON value is named in an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


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
        document = json.loads(body)
        if isinstance(document, str) and document.lstrip().startswith(("{", "[")):
            document = json.loads(document)
    except json.JSONDecodeError as error:
        raise NormalizationError(
            f"Editor.js body is not valid JSON: {error.msg} at line {error.lineno} "
            f"column {error.colno}"
        ) from error
    except RecursionError as error:
        raise NormalizationError("Editor.js body is nested too deeply to be parsed") from error
    if not isinstance(document, dict):
        raise NormalizationError(
            "Editor.js body must be a JSON object with a 'blocks' list, "
            f"but it is {_describe(document)}"
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
            f"Editor.js 'blocks' must be a list, but it is {_describe(document['blocks'])}"
        )
    return document


class _TreeBuilder:
    """Builds the HTML tree of one document and counts its block types."""

    def __init__(self) -> None:
        self.soup = BeautifulSoup("", "html.parser")
        self.block_counts: Counter[str] = Counter()
        self.unknown_types: set[str] = set()
        self._renderers: dict[str, Callable[[dict[str, Any], str, int], list[PageElement]]] = {
            "header": self._header,
            "paragraph": self._paragraph,
            "list": self._list,
            "checklist": self._checklist,
            "quote": self._quote,
            "code": self._code,
            "delimiter": self._delimiter,
            "warning": self._warning,
            "table": self._table,
            "image": self._image,
            "embed": self._embed,
            "link": self._link,
            "attaches": self._attaches,
            "raw": self._raw,
            "columns": self._columns,
        }

    # -- helpers ----------------------------------------------------------------------------

    def _tag(self, name: str, html: str = "", **attrs: str) -> Tag:
        """A new element whose children are the parsed `html` fragment."""
        tag = self.soup.new_tag(name, attrs=attrs)
        for node in parse_fragment(html):
            tag.append(node)
        return tag

    def _plain(self, name: str, text: str, **attrs: str) -> Tag:
        """A new element holding `text` as text (escaped as text, never parsed as markup)."""
        tag = self.soup.new_tag(name, attrs=attrs)
        if text:
            tag.append(NavigableString(text))
        return tag

    @staticmethod
    def _string(data: dict[str, Any], key: str, where: str) -> str:
        """A text field: "" when absent, numbers as written, anything else an error."""
        value = data.get(key)
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise NormalizationError(f"{where}: '{key}' must be a string, but it is {_describe(value)}")

    @staticmethod
    def _object(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
        value = data.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise NormalizationError(
                f"{where}: '{key}' must be an object, but it is {_describe(value)}"
            )
        return value

    @staticmethod
    def _has_content(tag: Tag) -> bool:
        return bool(tag.get_text().strip()) or tag.find("img") is not None

    # -- blocks -----------------------------------------------------------------------------

    def render_blocks(self, blocks: list[Any], parent: Tag, path: str, depth: int) -> None:
        """Append the elements of `blocks` to `parent`.

        Raises:
            NormalizationError: A block is not an object, has no usable `type`, or a field of a
                known block has the wrong JSON type; the message names the block.
        """
        for index, block in enumerate(blocks):
            where = f"{path}block {index}"
            if not isinstance(block, dict):
                raise NormalizationError(f"{where} must be an object, but it is {_describe(block)}")
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
                    f"{where}: 'data' must be an object, but it is {_describe(data)}"
                )
            self.block_counts[block_type] += 1
            kind = _kind_of(block_type)
            if kind is None:
                self.unknown_types.add(block_type)
                nodes = self._unknown(data, where, depth)
            else:
                nodes = self._renderers[kind](data, where, depth)
            for node in nodes:
                parent.append(node)

    def _header(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        level_value = data.get("level")
        level = 2
        if isinstance(level_value, int) and not isinstance(level_value, bool):
            level = level_value
        elif isinstance(level_value, str) and level_value.strip().isdigit():
            level = int(level_value)
        heading = self._tag(f"h{max(1, min(6, level))}", self._string(data, "text", where))
        return [heading] if heading.get_text().strip() else []

    def _paragraph(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        paragraph = self._tag("p", self._string(data, "text", where))
        return [paragraph] if self._has_content(paragraph) else []

    def _list_item(self, item: Any, where: str) -> tuple[str, bool, list[Any]]:
        """`(content html, checked, child items)` of one item in any of the list generations."""
        if item is None:
            return "", False, []
        if isinstance(item, str):
            return item, False, []
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            return str(item), False, []
        if not isinstance(item, dict):
            raise NormalizationError(
                f"{where} must be a string or an object, but it is {_describe(item)}"
            )
        key = "content" if "content" in item else "text"
        content = self._string(item, key, where)
        meta = self._object(item, "meta", where)
        checked = bool(meta["checked"] if "checked" in meta else item.get("checked"))
        children = item.get("items")
        if children is None:
            children = []
        if not isinstance(children, list):
            raise NormalizationError(
                f"{where}: 'items' must be a list, but it is {_describe(children)}"
            )
        return content, checked, children

    def _list_element(
        self,
        items: list[Any],
        where: str,
        *,
        ordered: bool,
        checklist: bool,
        start: int | None,
        level: int,
    ) -> Tag | None:
        element = self.soup.new_tag("ol" if ordered else "ul")
        if ordered and start is not None and start != 1:
            element["start"] = str(start)
        self._append_items(element, items, where, ordered=ordered, checklist=checklist, level=level)
        return element if element.contents else None

    def _append_items(
        self,
        element: Tag,
        items: list[Any],
        where: str,
        *,
        ordered: bool,
        checklist: bool,
        level: int,
    ) -> None:
        for index, item in enumerate(items):
            item_where = f"{where} item {index}"
            content, checked, children = self._list_item(item, item_where)
            entry = self.soup.new_tag("li")
            body = self._tag("span", content)
            if checklist and body.get_text().strip():
                checkbox = self.soup.new_tag("input", attrs={"type": "checkbox"})
                if checked:
                    checkbox["checked"] = ""
                entry.append(checkbox)
            for node in list(body.contents):
                entry.append(node)
            if children and level >= _MAX_LIST_DEPTH:
                if self._has_content(entry):
                    element.append(entry)
                self._append_items(
                    element, children, item_where, ordered=ordered, checklist=checklist, level=level
                )
                continue
            if children:
                nested = self._list_element(
                    children,
                    item_where,
                    ordered=ordered,
                    checklist=checklist,
                    start=None,
                    level=level + 1,
                )
                if nested is not None:
                    entry.append(nested)
            if entry.contents and (self._has_content(entry) or entry.find("li")):
                element.append(entry)

    def _list(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        items = data.get("items")
        if items is None:
            return []
        if not isinstance(items, list):
            raise NormalizationError(
                f"{where}: 'items' must be a list, but it is {_describe(items)}"
            )
        style_value = data.get("style")
        style = style_value.lower() if isinstance(style_value, str) else ""
        if style in ("ordered", "unordered"):
            checklist = False
        elif style == "checklist":
            checklist = True
        else:
            # No style: list v2 also reads the old checklist tool's `{text, checked}` items.
            checklist = any(
                isinstance(item, dict)
                and ("checked" in item or "checked" in (item.get("meta") or {}))
                for item in items
            )
        meta = self._object(data, "meta", where)
        start_value = meta.get("start", data.get("start"))
        start: int | None = None
        if isinstance(start_value, int) and not isinstance(start_value, bool):
            start = max(0, start_value)
        elif isinstance(start_value, str) and start_value.strip().isdigit():
            start = int(start_value)
        element = self._list_element(
            items,
            where,
            ordered=style == "ordered",
            checklist=checklist,
            start=start,
            level=1,
        )
        return [element] if element is not None else []

    def _checklist(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        return self._list({**data, "style": "checklist"}, where, depth)

    def _quote(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        quote = self.soup.new_tag("blockquote")
        text = self._tag("p", self._string(data, "text", where))
        if self._has_content(text):
            quote.append(text)
        caption = self._tag("p", self._string(data, "caption", where))
        if self._has_content(caption):
            caption.insert(0, NavigableString("— "))
            quote.append(caption)
        return [quote] if quote.contents else []

    def _code(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        code = self._string(data, "code", where)
        if not code.strip():
            return []
        language = self._string(data, "language", where) or self._string(data, "lang", where)
        attrs = {"class": f"language-{language.strip()}"} if language.strip() else {}
        pre = self.soup.new_tag("pre")
        pre.append(self._plain("code", code, **attrs))
        return [pre]

    def _delimiter(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        return [self.soup.new_tag("hr")]

    def _warning(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        title = self._tag("strong", self._string(data, "title", where))
        # editorjs-alert saves `message`; its README shows `text`: accept both.
        message_key = "message" if data.get("message") is not None else "text"
        message = self._tag("span", self._string(data, message_key, where))
        paragraph = self.soup.new_tag("p")
        if self._has_content(title):
            paragraph.append(title)
            paragraph.append(NavigableString(" "))
        for node in list(message.contents):
            paragraph.append(node)
        if not self._has_content(paragraph):
            return []
        quote = self.soup.new_tag("blockquote")
        quote.append(paragraph)
        return [quote]

    def _table(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        content = data.get("content")
        if content is None:
            return []
        if not isinstance(content, list):
            raise NormalizationError(
                f"{where}: 'content' must be a list of rows, but it is {_describe(content)}"
            )
        with_headings = bool(data.get("withHeadings", data.get("withHeading", False)))
        table = self.soup.new_tag("table")
        body = self.soup.new_tag("tbody")
        for row_index, row in enumerate(content):
            if not isinstance(row, list):
                raise NormalizationError(
                    f"{where}: row {row_index} must be a list of cells, but it is {_describe(row)}"
                )
            heading = with_headings and row_index == 0
            tr = self.soup.new_tag("tr")
            for cell_index, cell in enumerate(row):
                cell_where = f"{where} row {row_index} cell {cell_index}"
                cell_html = self._string({"value": cell}, "value", cell_where)
                tr.append(self._tag("th" if heading else "td", cell_html))
            if heading:
                head = self.soup.new_tag("thead")
                head.append(tr)
                table.append(head)
            elif tr.contents:
                body.append(tr)
        if body.contents:
            table.append(body)
        return [table] if table.get_text().strip() else []

    def _image(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        file_value = data.get("file")
        url = ""
        if isinstance(file_value, dict):
            url = self._string(file_value, "url", f"{where} file")
        elif isinstance(file_value, str):
            url = file_value
        url = url or self._string(data, "url", where)
        caption = fragment_text(self._string(data, "caption", where))
        paragraph = self.soup.new_tag("p")
        if url.strip():
            paragraph.append(self.soup.new_tag("img", attrs={"src": url.strip(), "alt": caption}))
        elif caption:
            paragraph.append(NavigableString(caption))
        return [paragraph] if paragraph.contents else []

    def _link_paragraph(self, url: str, text: str, note: str = "") -> Tag | None:
        """A paragraph with a link to `url` labelled `text` (the URL itself when empty)."""
        paragraph = self.soup.new_tag("p")
        url = url.strip()
        if url:
            paragraph.append(self._plain("a", text or url, href=url))
        elif text:
            paragraph.append(NavigableString(text))
        if note and note != text:
            paragraph.append(NavigableString(f" ({note})"))
        return paragraph if paragraph.contents else None

    def _embed(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        source = self._string(data, "source", where) or self._string(data, "embed", where)
        caption = fragment_text(self._string(data, "caption", where))
        paragraph = self._link_paragraph(source, caption)
        return [paragraph] if paragraph is not None else []

    def _link(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        meta = self._object(data, "meta", where)
        meta_where = f"{where} meta"
        title = " ".join(self._string(meta, "title", meta_where).split())
        site = " ".join(self._string(meta, "site_name", meta_where).split())
        description = self._string(meta, "description", meta_where)
        url = self._string(data, "link", where)
        nodes: list[PageElement] = []
        paragraph = self._link_paragraph(url, title or site, site if title else "")
        if paragraph is not None:
            nodes.append(paragraph)
        if description.strip():
            nodes.append(self._plain("p", description))
        return nodes

    def _attaches(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        file_info = self._object(data, "file", where)
        file_where = f"{where} file"
        name = self._string(file_info, "name", file_where)
        title = " ".join(self._string(data, "title", where).split())
        paragraph = self._link_paragraph(
            self._string(file_info, "url", file_where), title or name, name if title else ""
        )
        return [paragraph] if paragraph is not None else []

    def _raw(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        return [self._tag("div", self._string(data, "html", where))]

    def _columns(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        columns = data.get("cols")
        if columns is None:
            return []
        if not isinstance(columns, list):
            raise NormalizationError(
                f"{where}: 'cols' must be a list, but it is {_describe(columns)}"
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

    # -- unknown blocks ---------------------------------------------------------------------

    def _unknown(self, data: dict[str, Any], where: str, depth: int) -> list[PageElement]:
        # A known shape under an unknown name renders as that shape; if the shape turns out
        # not to fit, the string values are kept instead.
        shapes: list[tuple[bool, Callable[[dict[str, Any], str, int], list[PageElement]]]] = [
            (isinstance(data.get("code"), str), self._code),
            (_is_list_of_items(data.get("items")), self._list),
            (_is_list_of_rows(data.get("content")), self._table),
        ]
        for fits, render in shapes:
            if fits:
                try:
                    return render(data, where, depth)
                except NormalizationError:
                    break
        nodes: list[PageElement] = []
        for value in _strings(data):
            if _is_url(value):
                paragraph = self._link_paragraph(value, "")
                if paragraph is not None:
                    nodes.append(paragraph)
            else:
                paragraph = self._tag("p", value)
                if self._has_content(paragraph):
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
