"""`rag folders`: the named folders (partitions) of the files source."""

from pathlib import Path
from typing import Any

import click

from rag_pipeline.cli.common import cli_settings, errors_as_messages


def register(main: click.Group) -> None:
    """Add `rag folders` to `rag`."""
    main.add_command(folders)


@click.group()
def folders() -> None:
    """Named folders (partitions) of the files source.

    A document of a folder is named `<folder name>/<relative path>`: when a folder moves, point
    its name at the new place (`rag folders add docs NEWPATH`) and nothing is re-ingested.
    `rag ingest --path` registers its folders itself; register them here before running the
    job another way, e.g. `dagster job execute` in CI.
    """


_FOLDERS_PARTITIONS = "files_folders"


@folders.command("add")
@click.argument("name_or_path")
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
def folders_add(name_or_path: str, path: Path | None) -> None:
    """Register PATH as folder NAME (`rag folders add docs ~/docs`), re-point NAME to PATH, or
    register one path under a derived name (`rag folders add ~/docs`; `demo` = the bundled
    corpus)."""
    from rag_pipeline.operations.folders import register_folder
    from rag_pipeline.orchestration.instance import dagster_instance

    settings = cli_settings()
    with errors_as_messages():
        if path is None:
            registration = register_folder(settings, name_or_path)
        else:
            registration = register_folder(settings, path, name_or_path)
        instance = dagster_instance(settings)
        _forget_path_partitions(instance)
        if not instance.has_dynamic_partition(_FOLDERS_PARTITIONS, registration.name):
            instance.add_dynamic_partitions(_FOLDERS_PARTITIONS, [registration.name])
    if registration.previous is not None and registration.previous != registration.path:
        click.echo(f"{registration.name}\t{registration.path} (was {registration.previous})")
    else:
        click.echo(f"{registration.name}\t{registration.path}")


@folders.command("list")
def folders_list() -> None:
    """Print each registered folder: its name and path (`demo` is the bundled corpus)."""
    from rag_pipeline.operations.folders import registered_folders
    from rag_pipeline.orchestration.instance import dagster_instance

    settings = cli_settings()
    with errors_as_messages():
        paths = registered_folders(settings)
        instance = dagster_instance(settings)
        _forget_path_partitions(instance)
        names = list(instance.get_dynamic_partitions(_FOLDERS_PARTITIONS))
    for name in dict.fromkeys([*names, *paths]):
        path = paths.get(name)
        where = "(bundled corpus)" if name == "demo" else str(path) if path else "(no path)"
        missing = " (missing)" if path is not None and not path.is_dir() else ""
        click.echo(f"{name}\t{where}{missing}")


@folders.command("remove")
@click.argument("names", nargs=-1, required=True)
def folders_remove(names: tuple[str, ...]) -> None:
    """Unregister folders by name (their documents stay indexed until `rag clear`)."""
    from rag_pipeline.orchestration.instance import dagster_instance
    from rag_pipeline.store import folders as named_folders
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.runtime import ready_conninfo

    settings = cli_settings()
    with errors_as_messages():
        with connect(ready_conninfo(settings), autocommit=True) as conn:
            for name in names:
                named_folders.unregister(conn, name)
        instance = dagster_instance(settings)
        for name in names:
            instance.delete_dynamic_partition(_FOLDERS_PARTITIONS, name)


def _forget_path_partitions(instance: Any) -> None:
    """Replace partitions named by an absolute path (before schema m009 a folder's key was
    its path) with the name the folder is registered under, as the files sensor does; a path
    whose folder is gone is dropped."""
    from rag_pipeline.operations.folders import names_of_path_partitions
    from rag_pipeline.store.folders import FolderError

    settings = cli_settings()
    for key in instance.get_dynamic_partitions(_FOLDERS_PARTITIONS):
        if not key.startswith("/"):
            continue
        try:
            name = names_of_path_partitions(settings, [key])[key]
        except FolderError:
            name = None
        if name is not None and not instance.has_dynamic_partition(_FOLDERS_PARTITIONS, name):
            instance.add_dynamic_partitions(_FOLDERS_PARTITIONS, [name])
        instance.delete_dynamic_partition(_FOLDERS_PARTITIONS, key)
