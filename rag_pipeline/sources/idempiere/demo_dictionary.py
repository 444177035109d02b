"""The classic core dictionary of the demo: windows, processes and tabs from core_es_CO/*.csv.

The CSVs are iDempiere's translation export (base rows and their es_CO `_Trl` rows); which
tabs belong to which window and table comes from core_structure_INFERRED.sql. Columns the
export lacks get fixed defaults, and every row the same `Updated` (`_CORE_UPDATED`).
"""

import csv
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import psycopg
from psycopg import sql

from rag_pipeline.sources.idempiere.demo_files import demo_folder

# When the classic core rows were last synchronised (release 9); used as their Updated.
_CORE_UPDATED = datetime(2022, 9, 1)
_STRUCTURE_FILE = "core_structure_INFERRED.sql"


@dataclass(frozen=True)
class _CoreTable:
    """One core_es_CO table: its CSVs, translated columns and the defaults of missing columns."""

    table: str
    columns: tuple[str, ...]
    defaults: tuple[tuple[str, object], ...]


_CORE_TABLES = (
    _CoreTable(
        "AD_Window",
        ("Name", "Description", "Help"),
        (("WindowType", "M"), ("EntityType", "D")),
    ),
    _CoreTable(
        "AD_Process",
        ("Name", "Description", "Help"),
        # Value (the search key) is not in the translation export: empty, not invented.
        (("Value", ""), ("AccessLevel", "3"), ("EntityType", "D")),
    ),
)


def _csv_rows(path: Path) -> Iterator[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        yield from csv.DictReader(handle)


def load_core_dictionary(conn: psycopg.Connection) -> None:
    """Core windows, processes and the tabs linked in core_structure_INFERRED.sql, EN + es_CO."""
    folder = demo_folder() / "core_es_CO"
    for spec in _CORE_TABLES:
        key = f"{spec.table}_ID"
        base = [r for r in _csv_rows(folder / f"{spec.table.lower()}.csv") if r[key]]
        _insert_base(conn, spec.table, key, spec.columns, spec.defaults, base)
        trl = [r for r in _csv_rows(folder / f"{spec.table.lower()}_trl_es_CO.csv") if r[key]]
        _insert_trl(conn, spec.table, key, spec.columns, trl)
    conn.execute(cast(Any, (demo_folder() / _STRUCTURE_FILE).read_text(encoding="utf-8")))
    structure = {
        str(r[0]): r[1:]
        for r in conn.execute(
            "SELECT AD_Tab_ID::text, AD_Window_ID, AD_Table_ID, SeqNo, TabLevel FROM demo_core_tab"
        )
    }
    tabs = [r for r in _csv_rows(folder / "ad_tab.csv") if r["AD_Tab_ID"] in structure]
    tab_columns = ("Name", "Description", "Help", "CommitWarning")
    _insert_base(
        conn,
        "AD_Tab",
        "AD_Tab_ID",
        tab_columns,
        (("EntityType", "D"),),
        tabs,
        extra=("AD_Window_ID", "AD_Table_ID", "SeqNo", "TabLevel"),
        extra_values=structure,
    )
    trl = [r for r in _csv_rows(folder / "ad_tab_trl_es_CO.csv") if r["AD_Tab_ID"] in structure]
    _insert_trl(conn, "AD_Tab", "AD_Tab_ID", tab_columns, trl)
    conn.execute("DROP TABLE demo_core_tab")


def _blank_to_none(value: str | None) -> str | None:
    return value.strip() if value and value.strip() else None


def _insert_base(
    conn: psycopg.Connection,
    table: str,
    key: str,
    columns: Sequence[str],
    defaults: Sequence[tuple[str, object]],
    rows: Sequence[dict[str, str]],
    *,
    extra: Sequence[str] = (),
    extra_values: Mapping[str, Sequence[object]] | None = None,
) -> None:
    names = [
        key,
        *columns,
        *(d[0] for d in defaults),
        *extra,
        "AD_Client_ID",
        "AD_Org_ID",
        "CreatedBy",
        "UpdatedBy",
        "Created",
        "Updated",
    ]
    statement = sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING").format(
        sql.Identifier(table.lower()),
        sql.SQL(", ").join(sql.Identifier(n.lower()) for n in names),
        sql.SQL(", ").join(sql.Placeholder() * len(names)),
    )
    values = [
        (
            int(row[key]),
            *(_blank_to_none(row.get(c)) for c in columns),
            *(d[1] for d in defaults),
            *((extra_values or {}).get(row[key], ())),
            0,
            0,
            100,
            100,
            _CORE_UPDATED,
            _CORE_UPDATED,
        )
        for row in rows
    ]
    with conn.cursor() as cur:
        cur.executemany(statement, values)


def _insert_trl(
    conn: psycopg.Connection,
    table: str,
    key: str,
    columns: Sequence[str],
    rows: Sequence[dict[str, str]],
) -> None:
    names = [key, "AD_Language", *columns, "IsTranslated"]
    names += ["AD_Client_ID", "AD_Org_ID", "CreatedBy", "UpdatedBy", "Created", "Updated"]
    # Only rows whose base record was loaded (the tab CSV is a sample; ids may collide).
    statement = sql.SQL(
        "INSERT INTO {trl} ({names}) SELECT {values} WHERE EXISTS "
        "(SELECT 1 FROM {base} WHERE {key} = %s) ON CONFLICT DO NOTHING"
    ).format(
        trl=sql.Identifier(f"{table}_trl".lower()),
        names=sql.SQL(", ").join(sql.Identifier(n.lower()) for n in names),
        values=sql.SQL(", ").join(sql.Placeholder() * len(names)),
        base=sql.Identifier(table.lower()),
        key=sql.Identifier(key.lower()),
    )
    values = [
        (
            int(row[key]),
            row["AD_Language"],
            # Name is NOT NULL in every _Trl table: an empty translation keeps an empty string.
            *(
                (row.get(c) or "").strip() if c == "Name" else _blank_to_none(row.get(c))
                for c in columns
            ),
            row.get("IsTranslated") or "N",
            0,
            0,
            100,
            100,
            _CORE_UPDATED,
            _CORE_UPDATED,
            int(row[key]),
        )
        for row in rows
    ]
    with conn.cursor() as cur:
        cur.executemany(statement, values)
