"""Named folders for every entry point (CLI, Dagster resource, sensor), without Dagster.

The names live in the vector database (`store/folders.py`), shared by every process that
runs the files source, Celery workers on other machines included.
"""

from collections.abc import Iterable
from pathlib import Path

from rag_pipeline.settings import Settings
from rag_pipeline.sources.files import DEMO_PARTITION, FolderLookup, resolve_folder
from rag_pipeline.store import folders
from rag_pipeline.store.connection import connect
from rag_pipeline.store.runtime import ready_conninfo


def register_folder(
    settings: Settings, path: str | Path, name: str | None = None
) -> folders.Registration:
    """Register a folder (`demo`: the bundled corpus) under `name`, or under the name it has
    or `derived_name` gives it."""
    if str(path) == DEMO_PARTITION and name in (None, DEMO_PARTITION):
        return folders.Registration(DEMO_PARTITION, Path(DEMO_PARTITION), None, new=False)
    folder = resolve_folder(path)
    with connect(ready_conninfo(settings), autocommit=True) as conn:
        chosen = folders.check_name(name) if name else folders.derived_name(conn, folder)
        return folders.register(conn, chosen, folder)


def register_entry(settings: Settings, entry: str) -> str:
    """Register one RAG_FILES_FOLDERS entry (`NAME=PATH`, a path, or `demo`); its name."""
    name, sep, path = entry.partition("=")
    registration = (
        register_folder(settings, path, name) if sep else register_folder(settings, entry)
    )
    return registration.name


def configured_folders(settings: Settings) -> list[str]:
    """The names of RAG_FILES_FOLDERS's entries, registered."""
    return list(dict.fromkeys(register_entry(settings, e) for e in settings.files_folder_list))


def names_of_path_partitions(settings: Settings, keys: Iterable[str]) -> dict[str, str]:
    """Partition keys that are a folder's path (before schema m009, or typed in the UI), each
    with the name it is registered under (registered now if it was not); a key whose folder
    is gone raises FolderError."""
    return {key: register_folder(settings, key).name for key in keys if key.startswith("/")}


def registered_folders(settings: Settings) -> dict[str, Path]:
    """Every registered name and its folder (`demo` not included)."""
    with connect(ready_conninfo(settings)) as conn:
        return folders.registered(conn)


def folder_lookup(settings: Settings) -> FolderLookup:
    """Where a name's folder is, read from the database once per name."""
    known: dict[str, Path | None] = {}

    def lookup(name: str) -> Path | None:
        if name not in known:
            with connect(ready_conninfo(settings)) as conn:
                known[name] = folders.folder_of(conn, name)
        return known[name]

    return lookup
