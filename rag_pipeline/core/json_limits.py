"""JSON from another server or a client, decoded with a bound on its nesting (issue 49).

`json.loads` recurses once per level: a 400 KB array nested 200,000 deep raises
`RecursionError`, which nobody catches as a bad answer, and a value nested a few hundred
levels deep decodes but breaks whatever walks it next (`repr`, pickling). `loads_bounded`
turns both into `JSONTooDeepError`, a `ValueError` naming the limit; nothing the wiki, an
Editor.js body or an MCP request legitimately holds comes near it.
"""

import json
from typing import cast

MAX_DEPTH = 100


class JSONTooDeepError(ValueError):
    """The JSON is nested more deeply than the limit."""


def loads_bounded(data: str | bytes, *, max_depth: int = MAX_DEPTH) -> object:
    """`json.loads(data)`, refusing nesting deeper than `max_depth` arrays and objects.

    Raises:
        JSONTooDeepError: The value is nested more deeply than `max_depth`.
        ValueError: `data` is not JSON (`json.JSONDecodeError`, `UnicodeDecodeError`).
    """
    try:
        value: object = json.loads(data)
    except RecursionError:
        raise JSONTooDeepError(f"JSON nested more than {max_depth} levels deep") from None
    if depth_exceeds(value, max_depth):
        raise JSONTooDeepError(f"JSON nested more than {max_depth} levels deep")
    return value


def depth_exceeds(value: object, max_depth: int) -> bool:
    """Whether `value` nests lists and dicts more than `max_depth` deep (no recursion)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = list(cast(dict[object, object], item).values())
        elif isinstance(item, list):
            children = cast(list[object], item)
        else:
            continue
        if level + 1 > max_depth:
            return True
        stack.extend((child, level + 1) for child in children)
    return False
