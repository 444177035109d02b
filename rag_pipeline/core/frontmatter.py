"""YAML front matter at the top of a Markdown file, split off into metadata.

Front matter comes from whoever wrote the file, so it is parsed defensively: a 420-byte
"billion laughs" of YAML aliases once expanded to gigabytes. Aliases are refused outright
(metadata never needs them), and the block's size, nesting depth and node count are capped,
so a hostile block fails its own document quickly and nothing else.
"""

import datetime as dt
from typing import Any, cast

import yaml
from yaml.nodes import Node

from rag_pipeline.core.normalize.markdown import split_front_matter as find_front_matter

# Generous for metadata (titles, tags, dates), tiny next to what a bomb needs.
MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_FRONT_MATTER_DEPTH = 16
MAX_FRONT_MATTER_NODES = 10_000


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

    What counts as front matter is the normalizer's rule (a leading `---` block whose first
    line is a `key:`), so a document that merely opens with a thematic break is content.
    """
    block, rest = find_front_matter(text)
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
