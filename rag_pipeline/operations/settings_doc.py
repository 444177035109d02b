"""The settings table of docs/settings.md, generated from `Settings` so the two cannot drift.

`python -m rag_pipeline.operations.settings_doc docs/settings.md` rewrites the table between the
`<!-- settings:start -->` and `<!-- settings:end -->` lines; a test fails when it is stale.
"""

import sys
from pathlib import Path

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from rag_pipeline.settings import Settings

START = "<!-- settings:start -->"
END = "<!-- settings:end -->"


def settings_table() -> str:
    """One Markdown row per setting: its variable, default and what it does."""
    rows = ["| variable | default | what it does |", "| --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        description = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{_variable(name, field)}` | {_default(field)} | {description} |")
    return "\n".join(rows)


def _variable(name: str, field: FieldInfo) -> str:
    alias = field.validation_alias
    choices = getattr(alias, "choices", None)
    if choices:
        # Environment variables are matched ignoring case: list each name once.
        return " / ".join(dict.fromkeys(str(choice).upper() for choice in choices))
    return f"RAG_{name.upper()}"


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        return "(computed)"
    value = field.default
    if value is PydanticUndefined or value is None:
        return "—"
    if hasattr(value, "get_secret_value"):
        return "—"
    text = str(value).replace("|", "\\|")
    return f"`{text}`" if text else '`""`'


def with_table(text: str) -> str:
    """`text` (the README) with its settings table regenerated."""
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise ValueError(f"no {START} ... {END} block")
    return f"{head}{START}\n{settings_table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    """Rewrite the table of each file named."""
    for name in argv:
        path = Path(name)
        path.write_text(with_table(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
