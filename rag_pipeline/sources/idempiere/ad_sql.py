"""The pieces the `ad_metadata` statements of `ad_queries` are assembled from.

A text column of the Application Dictionary is read in the requested language by falling back
from its `_Trl` row to the base row (`trl`), through a left join of the active translation row
(`join_trl`); each entity's statements name these fragments by placeholder (`TABLE_TRL` …) and
`fill` puts them in. `literal_sql` marks the assembled text as SQL for psycopg.
"""

from collections.abc import Mapping
from typing import LiteralString, cast

from psycopg import sql


def literal_sql(text: str) -> sql.SQL:
    """A statement of `ad_queries` as psycopg SQL."""
    # The statements are assembled from constants of ad_queries and this module only, never
    # from values.
    return sql.SQL(cast(LiteralString, text))


def trl(alias: str, base: str, column: str) -> str:
    """`column` of the translation row `alias`, else of the base row `base`."""
    return f"COALESCE(NULLIF({alias}.{column}, ''), {base}.{column})"


def join_trl(table: str, alias: str, base: str) -> str:
    """The join of `table`'s active translation row in the language `%(lang)s`, as `alias`."""
    return (
        f"LEFT JOIN {table}_trl {alias} ON {alias}.{table}_id = {base}.{table}_id "
        f"AND {alias}.ad_language = %(lang)s AND {alias}.isactive = 'Y'"
    )


def fill(template: str, fills: Mapping[str, str]) -> str:
    """`template` with each `{placeholder}` of `fills` replaced by its SQL."""
    for placeholder, text in fills.items():
        template = template.replace("{" + placeholder + "}", text)
    return template


# The translated columns and translation joins each entity's statements use, by placeholder.
TABLE_TRL = {"name": trl("tt", "tb", "name"), "join_trl": join_trl("ad_table", "tt", "tb")}
WINDOW_TRL = {
    "name": trl("wt", "w", "name"),
    "description": trl("wt", "w", "description"),
    "help": trl("wt", "w", "help"),
    "join_trl": join_trl("ad_window", "wt", "w"),
}
TAB_TRL = {
    "window_name": trl("wt", "w", "name"),
    "name": trl("tt", "tab", "name"),
    "description": trl("tt", "tab", "description"),
    "help": trl("tt", "tab", "help"),
    "commitwarning": trl("tt", "tab", "commitwarning"),
    "join_window_trl": join_trl("ad_window", "wt", "w"),
    "join_trl": join_trl("ad_tab", "tt", "tab"),
}
FIELD_TRL = {
    "window_name": trl("wt", "w", "name"),
    "tab_name": trl("tt", "tab", "name"),
    "name": trl("ft", "f", "name"),
    "join_trl": join_trl("ad_field", "ft", "f"),
    "join_tab_trl": join_trl("ad_tab", "tt", "tab"),
    "join_window_trl": join_trl("ad_window", "wt", "w"),
}
PROCESS_TRL = {
    "name": trl("pt", "p", "name"),
    "description": trl("pt", "p", "description"),
    "help": trl("pt", "p", "help"),
    "join_trl": join_trl("ad_process", "pt", "p"),
}
