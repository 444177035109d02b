"""YAML front matter at the top of a Markdown file, split off into metadata."""

import datetime as dt
from typing import Any, cast

import yaml

from rag_pipeline.core.normalize.markdown import split_front_matter as find_front_matter


class FrontMatterError(ValueError):
    """The front matter is not valid YAML mapping."""


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Return the front matter as a JSON-ready dict and the text after it.

    What counts as front matter is the normalizer's rule (a leading `---` block whose first
    line is a `key:`), so a document that merely opens with a thematic break is content.
    """
    block, rest = find_front_matter(text)
    if not block:
        return {}, text
    inner = "\n".join(block.split("\n")[1:-1])
    try:
        data: object = yaml.safe_load(inner)
    except yaml.YAMLError as exc:
        raise FrontMatterError(f"front matter is not valid YAML: {exc}") from exc
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
