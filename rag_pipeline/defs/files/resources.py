"""The `files` source's configuration in Dagster."""

import dagster as dg
from pydantic import Field

from rag_pipeline.core.source import Source
from rag_pipeline.orchestration.pipeline import SourceResource
from rag_pipeline.settings import Settings
from rag_pipeline.sources.files import FilesSource, FolderError, partition_key_for


class FilesSourceResource(SourceResource):
    """Folders of .md, .html, Editor.js .json and .txt files (`demo` = the bundled corpus)."""

    folders: str = Field(
        default="demo", description="RAG_FILES_FOLDERS: folders the sensor watches, ':'-separated"
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
        """The files source."""
        return FilesSource(max_bytes=self.max_bytes)

    def partition_keys(self) -> list[str]:
        """The configured folders that exist, as partition keys."""
        keys: list[str] = []
        for folder in dict.fromkeys(p.strip() for p in self.folders.split(":") if p.strip()):
            try:
                keys.append(partition_key_for(folder))
            except FolderError as exc:
                dg.get_dagster_logger().warning(f"RAG_FILES_FOLDERS: {exc}")
        return keys
