"""YAML front matter at the top of a Markdown file: where it ends, and its metadata.

This module is the one place that decides what front matter is (`front_matter_bounds`); the
Markdown converter keeps such a block verbatim and the chunker keeps it as one opaque block.

Front matter comes from whoever wrote the file, so it is parsed defensively: a 420-byte
"billion laughs" of YAML aliases once expanded to gigabytes. Aliases are refused outright
(metadata never needs them), and the block's size, nesting depth and node count are capped,
so a hostile block fails its own document quickly and nothing else.
"""

import datetime as dt
from typing import Any, cast

import yaml
from yaml.nodes import Node

# Generous for metadata (titles, tags, dates), tiny next to what a bomb needs.
MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_FRONT_MATTER_DEPTH = 16
MAX_FRONT_MATTER_NODES = 10_000


def front_matter_bounds(text: str) -> tuple[int, int] | None:
    """Find a leading YAML front-matter block.

    Front matter is a first line `---`, then lines whose first non-blank one is a `key:` (or
    a YAML comment), then a line `---` or `...`; anything else that opens with `---` is a
    thematic break. Lines end at `\n` (a `\r` before it belongs to the line).

    Args:
        text: Markdown text.

    Returns:
        `(end, rest)`: the offset where the closing line ends (before its `\n`) and where the
        text after the block starts; None when the text has no front matter.
    """
    first_end = text.find("\n")
    if first_end < 0 or text[:first_end].rstrip() != "---":
        return None
    start = first_end + 1
    while True:
        end = text.find("\n", start)
        stop = len(text) if end < 0 else end
        if text[start:stop].rstrip() in ("---", "..."):
            inner = (line.lstrip() for line in text[first_end + 1 : start].split("\n"))
            first = next((line for line in inner if line), "")
            if not (first.startswith("#") or ":" in first):
                return None
            return stop, min(stop + 1, len(text))
        if end < 0:
            return None
        start = end + 1


def front_matter_block(text: str) -> tuple[str, str]:
    """Split a leading front-matter block (see `front_matter_bounds`) off a Markdown text.

    Args:
        text: Markdown text that may start with a `---` ... `---` YAML block.

    Returns:
        `(block, rest)`: the block including its fences ("" when there is none) and the
        remaining text.
    """
    bounds = front_matter_bounds(text)
    if bounds is None:
        return "", text
    return text[: bounds[0]], text[bounds[1] :]


class FrontMatterError(ValueError):
    """The front matter is not an acceptable YAML mapping; str(error) says why."""


class _GuardedLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and counts depth and nodes while composing."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Node | None, index: object) -> Node | None:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):  # pyright: ignore[reportUnknownMemberType]
            raise FrontMatterError(
                "front matter uses a YAML alias (*name); aliases are not allowed"
            )
        self._nodes += 1
        if self._nodes > MAX_FRONT_MATTER_NODES:
            raise FrontMatterError(f"front matter has more than {MAX_FRONT_MATTER_NODES:,} values")
        self._depth += 1
        if self._depth > MAX_FRONT_MATTER_DEPTH:
            raise FrontMatterError(
                f"front matter is nested deeper than {MAX_FRONT_MATTER_DEPTH} levels"
            )
        try:
            return super().compose_node(parent, index)  # type: ignore[no-untyped-call]
        finally:
            self._depth -= 1


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Return the front matter as a JSON-ready dict and the text after it.

    What counts as front matter is `front_matter_bounds` (a leading `---` block whose first
    line is a `key:`), so a document that merely opens with a thematic break is content.
    """
    block, rest = front_matter_block(text)
    if not block:
        return {}, text
    inner = "\n".join(block.split("\n")[1:-1])
    size = len(inner.encode("utf-8", "surrogatepass"))
    if size > MAX_FRONT_MATTER_BYTES:
        raise FrontMatterError(
            f"front matter is {size:,} bytes, over the limit of {MAX_FRONT_MATTER_BYTES:,}"
        )
    loader = _GuardedLoader(inner)
    try:
        data: object = loader.get_single_data()
    except yaml.YAMLError as exc:
        raise FrontMatterError(f"front matter is not valid YAML: {exc}") from exc
    finally:
        loader.dispose()  # pyright: ignore[reportUnknownMemberType]
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrontMatterError("front matter must be a YAML mapping (key: value lines)")
    mapping = cast(dict[object, object], data)
    return {str(key): _jsonable(value) for key, value in mapping.items()}, rest


def _jsonable(value: object) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in cast(dict[object, object], value).items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in cast(list[object], value)]
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
