"""Named folders of the files source: which folder on this machine each partition name means.

A document's identity (`<name>/<relative path>`) never holds a path, so a folder can move, be
mounted elsewhere or come back from a backup on another machine: re-pointing its name
(`register(conn, name, new_path)`) is all it takes, and nothing is re-ingested. `demo` is
the corpus shipped in the package and is never stored here.
"""

import re
from dataclasses import dataclass
from pathlib import Path

import psycopg

DEMO = "demo"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class FolderError(ValueError):
    """The folder of a `files` partition cannot be used (raised here and by `sources/files.py`)."""


class FolderNameError(FolderError):
    """A folder name that cannot be a partition key."""


@dataclass(frozen=True)
class Registration:
    """A folder registered under a name, and where that name pointed before (if anywhere)."""

    name: str
    path: Path
    previous: Path | None
    new: bool


def check_name(name: str) -> str:
    """`name` if it can name a folder: letters, digits, `.`, `_`, `-`; 64 at most."""
    if not _NAME.fullmatch(name):
        raise FolderNameError(
            f"{name!r} cannot name a folder: use 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def registered(conn: psycopg.Connection) -> dict[str, Path]:
    """Every registered name and its folder."""
    rows = conn.execute("SELECT name, path FROM rag.folders ORDER BY name").fetchall()
    return {name: Path(path) for name, path in rows}


def folder_of(conn: psycopg.Connection, name: str) -> Path | None:
    """The folder a name stands for, or None."""
    row = conn.execute("SELECT path FROM rag.folders WHERE name = %s", (name,)).fetchone()
    return Path(row[0]) if row else None


def name_of(conn: psycopg.Connection, path: Path) -> str | None:
    """The name a folder is registered under, or None."""
    row = conn.execute("SELECT name FROM rag.folders WHERE path = %s", (str(path),)).fetchone()
    return row[0] if row else None


def derived_name(conn: psycopg.Connection, path: Path) -> str:
    """The name `rag ingest --path` gives a folder: its registered name, else its last path
    component made valid, with `-2`, `-3`... when another folder has it."""
    existing = name_of(conn, path)
    if existing is not None:
        return existing
    base = _NOT_IN_NAME.sub("-", path.name).strip("-.")[:56] or "folder"
    if not base[0].isalnum():
        base = "folder-" + base
    taken = set(registered(conn)) | {DEMO}
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def register(conn: psycopg.Connection, name: str, path: Path) -> Registration:
    """Point `name` at `path` (committed). Re-pointing a name keeps its documents: their
    identity holds no path; only the file URLs shown in results move with it."""
    check_name(name)
    if name == DEMO:
        raise FolderNameError("'demo' is the bundled corpus and cannot be re-pointed")
    with conn.transaction():
        owner = name_of(conn, path)
        if owner is not None and owner != name:
            raise FolderNameError(f"{path} is already registered as {owner!r}")
        previous = folder_of(conn, name)
        conn.execute(
            "INSERT INTO rag.folders (name, path) VALUES (%s, %s)"
            " ON CONFLICT (name) DO UPDATE SET path = EXCLUDED.path",
            (name, str(path)),
        )
        if previous is not None and previous != path:
            _move_urls(conn, name, previous, path)
    return Registration(name, path, previous, new=previous is None)


def unregister(conn: psycopg.Connection, name: str) -> bool:
    """Forget a name (its documents stay indexed until `rag clear`); True if it existed."""
    with conn.transaction():
        deleted = conn.execute("DELETE FROM rag.folders WHERE name = %s", (name,)).rowcount
    return deleted > 0


def _move_urls(conn: psycopg.Connection, name: str, old: Path, new: Path) -> None:
    old_prefix, new_prefix = old.as_uri() + "/", new.as_uri() + "/"
    conn.execute(
        "UPDATE rag.documents SET url = %s || substr(url, length(%s) + 1)"
        " WHERE source_type = 'files' AND starts_with(source_id, %s)"
        " AND starts_with(url, %s)",
        (new_prefix, old_prefix, name + "/", old_prefix),
    )
