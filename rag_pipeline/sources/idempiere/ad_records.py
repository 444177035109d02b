"""The records the rows of the `ad_metadata` statements become, one frozen dataclass per row.

Each names the columns its statement in `ad_queries` selects (psycopg's `class_row` builds
it from them): a listed document (`Listed`), an entity in one language (`TableRow`,
`WindowRow`, `TabRow`, `FieldRow`, `ProcessRow`) or a child row a document lists
(`ColumnRow`, `FieldLine`, `ParameterRow`).
"""

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Listed:
    """One document in a listing: its record id and cheap version parts."""

    id: int
    updated: datetime
    rows: int


@dataclass(frozen=True)
class TableRow:
    """An AD_Table in one language."""

    id: int
    tablename: str
    name: str
    description: str | None
    help: str | None
    isview: str
    entitytype: str


@dataclass(frozen=True)
class ColumnRow:
    """An active AD_Column of a table."""

    parent_id: int
    name: str
    columnname: str
    description: str | None
    iskey: str
    ismandatory: str


@dataclass(frozen=True)
class WindowRow:
    """An AD_Window in one language."""

    id: int
    name: str
    description: str | None
    help: str | None
    windowtype: str
    entitytype: str


@dataclass(frozen=True)
class TabRow:
    """An AD_Tab with its window's name and table (a document, or a line of a window)."""

    id: int
    window_id: int
    window_name: str
    name: str
    description: str | None
    help: str | None
    commitwarning: str | None
    tablename: str | None
    tablevel: int
    seqno: int


@dataclass(frozen=True)
class FieldLine:
    """An active AD_Field of a tab, as a window or tab summary lists it."""

    parent_id: int
    name: str
    columnname: str | None


@dataclass(frozen=True)
class FieldRow:
    """The AD_Field chosen for one column name of a window, with its context."""

    id: int
    window_id: int
    window_name: str
    tab_id: int
    tab_name: str
    name: str
    description: str | None
    help: str | None
    columnname: str | None
    tablename: str | None


@dataclass(frozen=True)
class ProcessRow:
    """An AD_Process (or report) in one language."""

    id: int
    value: str | None
    name: str
    description: str | None
    help: str | None
    isreport: str
    classname: str | None
    entitytype: str


@dataclass(frozen=True)
class ParameterRow:
    """An active AD_Process_Para of a process."""

    parent_id: int
    name: str
    columnname: str
    description: str | None
    help: str | None
    ismandatory: str
    isrange: str
