"""YAML front matter at the top of a Markdown file, split off into metadata."""

import datetime as dt
import re
from typing import Any, cast

import yaml

# CommonMark-compatible front matter: '---' on the first line, closed by '---' or '...'.
_FRONT_MATTER = re.compile(
    r"\A---[ \t]*\r?\n(.*?)(?:\r?\n)?^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S | re.M
)


class FrontMatterError(ValueError):
    """The front matter is not valid YAML mapping."""


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Return the front matter as a JSON-ready dict and the text after it."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, text
    try:
        data: object = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise FrontMatterError(f"front matter is not valid YAML: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrontMatterError("front matter must be a YAML mapping (key: value lines)")
    mapping = cast(dict[object, object], data)
    return {str(key): _jsonable(value) for key, value in mapping.items()}, text[match.end() :]


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
