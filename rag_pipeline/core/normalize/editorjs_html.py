# pyright: standard
# Standard, not strict, for the reason editorjs.py gives: block data is arbitrary JSON.
"""The toolkit every Editor.js block renderer shares: making elements and reading block fields.

`BlockHtml` holds the tree being built and makes its elements, from an HTML fragment (the way
Editor.js stores text) or from plain text. The field readers take a value of a block's `data`
and either return it in the type the renderer needs or raise a `NormalizationError` that names
the block, the key and what was found instead.
"""

from typing import Any

from bs4 import BeautifulSoup, Tag
from bs4.element import NavigableString

from rag_pipeline.core.normalize.document import NormalizationError
from rag_pipeline.core.normalize.inline import parse_fragment


def describe(value: Any) -> str:
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


def string_field(data: dict[str, Any], key: str, where: str) -> str:
    """A text field: "" when absent, numbers as written, anything else an error."""
    value = data.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise NormalizationError(f"{where}: '{key}' must be a string, but it is {describe(value)}")


def object_field(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """An object field: {} when absent, anything else but an object an error."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise NormalizationError(f"{where}: '{key}' must be an object, but it is {describe(value)}")
    return value


def has_content(tag: Tag) -> bool:
    """True when `tag` shows text or an image."""
    return bool(tag.get_text().strip()) or tag.find("img") is not None


class BlockHtml:
    """The HTML tree of one document, and the elements renderers make for it."""

    def __init__(self) -> None:
        self.soup = BeautifulSoup("", "html.parser")

    def tag(self, name: str, html: str = "", **attrs: str) -> Tag:
        """A new element whose children are the parsed `html` fragment."""
        tag = self.soup.new_tag(name, attrs=attrs)
        for node in parse_fragment(html):
            tag.append(node)
        return tag

    def plain(self, name: str, text: str, **attrs: str) -> Tag:
        """A new element holding `text` as text (escaped as text, never parsed as markup)."""
        tag = self.soup.new_tag(name, attrs=attrs)
        if text:
            tag.append(NavigableString(text))
        return tag
