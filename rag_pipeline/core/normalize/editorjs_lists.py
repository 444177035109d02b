# pyright: standard
# Standard, not strict, for the reason editorjs.py gives: block data is arbitrary JSON.
"""Editor.js list blocks as HTML lists: the list tool's three generations and the checklist.

One reader takes every item shape the tools have saved (a string, `{text, checked}` of the old
checklist, `{content, meta, items}` of nested list v2); nested items become nested lists down
to `MAX_LIST_DEPTH` levels, deeper ones are attached to the last level kept.
"""

from typing import Any

from bs4 import Tag
from bs4.element import PageElement

from rag_pipeline.core.normalize.document import NormalizationError
from rag_pipeline.core.normalize.editorjs_html import (
    BlockHtml,
    describe,
    has_content,
    object_field,
    string_field,
)

# Deeper list levels are attached to this one. markdown-it's presets other than "default"
# stop parsing at 20 levels of block nesting (a list level costs two), silently dropping what
# is deeper; 8 levels keep the output safe for any downstream parser, and no reader follows
# more indentation than that.
MAX_LIST_DEPTH = 8


def _list_item(item: Any, where: str) -> tuple[str, bool, list[Any]]:
    """`(content html, checked, child items)` of one item in any of the list generations."""
    if item is None:
        return "", False, []
    if isinstance(item, str):
        return item, False, []
    if isinstance(item, (int, float)) and not isinstance(item, bool):
        return str(item), False, []
    if not isinstance(item, dict):
        raise NormalizationError(
            f"{where} must be a string or an object, but it is {describe(item)}"
        )
    key = "content" if "content" in item else "text"
    content = string_field(item, key, where)
    meta = object_field(item, "meta", where)
    checked = bool(meta["checked"] if "checked" in meta else item.get("checked"))
    children = item.get("items")
    if children is None:
        children = []
    if not isinstance(children, list):
        raise NormalizationError(f"{where}: 'items' must be a list, but it is {describe(children)}")
    return content, checked, children


def _list_element(
    html: BlockHtml,
    items: list[Any],
    where: str,
    *,
    ordered: bool,
    checklist: bool,
    start: int | None,
    level: int,
) -> Tag | None:
    element = html.soup.new_tag("ol" if ordered else "ul")
    if ordered and start is not None and start != 1:
        element["start"] = str(start)
    _append_items(html, element, items, where, ordered=ordered, checklist=checklist, level=level)
    return element if element.contents else None


def _append_items(
    html: BlockHtml,
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
        content, checked, children = _list_item(item, item_where)
        entry = html.soup.new_tag("li")
        body = html.tag("span", content)
        if checklist and body.get_text().strip():
            checkbox = html.soup.new_tag("input", attrs={"type": "checkbox"})
            if checked:
                checkbox["checked"] = ""
            entry.append(checkbox)
        for node in list(body.contents):
            entry.append(node)
        if children and level >= MAX_LIST_DEPTH:
            if has_content(entry):
                element.append(entry)
            _append_items(
                html,
                element,
                children,
                item_where,
                ordered=ordered,
                checklist=checklist,
                level=level,
            )
            continue
        if children:
            nested = _list_element(
                html,
                children,
                item_where,
                ordered=ordered,
                checklist=checklist,
                start=None,
                level=level + 1,
            )
            if nested is not None:
                entry.append(nested)
        if entry.contents and (has_content(entry) or entry.find("li")):
            element.append(entry)


def render_list(html: BlockHtml, data: dict[str, Any], where: str) -> list[PageElement]:
    """A list block (any generation of the list tool) as an `ol` or `ul`."""
    items = data.get("items")
    if items is None:
        return []
    if not isinstance(items, list):
        raise NormalizationError(f"{where}: 'items' must be a list, but it is {describe(items)}")
    style_value = data.get("style")
    style = style_value.lower() if isinstance(style_value, str) else ""
    if style in ("ordered", "unordered"):
        checklist = False
    elif style == "checklist":
        checklist = True
    else:
        # No style: list v2 also reads the old checklist tool's `{text, checked}` items.
        checklist = any(
            isinstance(item, dict) and ("checked" in item or "checked" in (item.get("meta") or {}))
            for item in items
        )
    meta = object_field(data, "meta", where)
    start_value = meta.get("start", data.get("start"))
    start: int | None = None
    if isinstance(start_value, int) and not isinstance(start_value, bool):
        start = max(0, start_value)
    elif isinstance(start_value, str) and start_value.strip().isdigit():
        start = int(start_value)
    element = _list_element(
        html,
        items,
        where,
        ordered=style == "ordered",
        checklist=checklist,
        start=start,
        level=1,
    )
    return [element] if element is not None else []


def render_checklist(html: BlockHtml, data: dict[str, Any], where: str) -> list[PageElement]:
    """A checklist block: a list whose items carry checkboxes."""
    return render_list(html, {**data, "style": "checklist"}, where)
