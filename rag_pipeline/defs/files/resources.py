"""The `files` source's configuration in Dagster."""

import dagster as dg
from pydantic import Field

from rag_pipeline.core.source import Source
from rag_pipeline.operations.folders import folder_lookup, register_entry
from rag_pipeline.orchestration.pipeline import SourceResource
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.sources.files import FilesSource
from rag_pipeline.store.folders import FolderError


class FilesSourceResource(SourceResource):
    """Named folders of .md, .html, Editor.js .json and .txt files (`demo` = the bundled corpus)."""

    folders: str = Field(
        default="demo",
        description=(
            "RAG_FILES_FOLDERS: folders the sensor watches, ':'-separated, each NAME=PATH or a "
            "path (named after its last component)"
        ),
    )
    max_bytes: int = Field(
        default=5 * 1024 * 1024,
        description="RAG_FILES_MAX_BYTES: larger files are recorded as failed",
    )

    @classmethod
    def from_settings(cls, settings: Settings) -> "FilesSourceResource":
        """The resource with the given settings as its defaults."""
        return cls(folders=settings.files_folders, max_bytes=settings.files_max_bytes)

    def build(self) -> Source:
        """The files source, finding each folder name's path in the database."""
        return FilesSource(max_bytes=self.max_bytes, folders=folder_lookup(load_settings()))

    def partition_keys(self) -> list[str]:
        """The configured folders that exist, registered, as partition keys (folder names)."""
        settings = load_settings().model_copy(update={"files_folders": self.folders})
        keys: list[str] = []
        for entry in settings.files_folder_list:
            try:
                keys.append(register_entry(settings, entry))
            except (FolderError, ValueError) as exc:
                dg.get_dagster_logger().warning(f"RAG_FILES_FOLDERS: {exc}")
        return list(dict.fromkeys(keys))
