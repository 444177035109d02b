"""The `files` source: a local folder of Markdown, HTML, Editor.js JSON and text files.

A partition is a folder: `demo` for the corpus shipped in the package, else the folder's
absolute real path. A document is a file, named by its path (`<folder>/<relative path>`,
`demo/<relative path>`), so a file reachable from two registered folders is one document and
nothing depends on where the package was imported from. Its cheap version is its size and
modification time; its language comes from its front matter.
"""

import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from rag_pipeline.core.models import FailedDocument, SourceFormat
from rag_pipeline.core.safe_files import FileEntry, SkippedEntry, iter_folder, read_capped
from rag_pipeline.core.source import (
    ChainOptions,
    DocumentError,
    DocumentRef,
    Source,
    SourceDocument,
    fetch_each,
)

SOURCE_TYPE = "files"
DEMO_PARTITION = "demo"
FORMATS: Mapping[str, SourceFormat] = {
    ".md": SourceFormat.MARKDOWN,
    ".markdown": SourceFormat.MARKDOWN,
    ".html": SourceFormat.HTML,
    ".htm": SourceFormat.HTML,
    ".json": SourceFormat.EDITORJS,
    ".txt": SourceFormat.TEXT,
}
CHAIN_OPTIONS = ChainOptions(front_matter=True)
# Dagster partition keys may not contain these.
_FORBIDDEN_IN_KEYS = set("|,[]")


class FolderError(ValueError):
    """The folder of a `files` partition cannot be used."""


def demo_folder() -> Path:
    """The demo corpus shipped inside the package."""
    return Path(__file__).resolve().parents[1] / "demo" / "files"


def partition_key_for(folder: str | Path) -> str:
    """The partition key of a folder: `demo` for the bundled corpus, else its real path."""
    if str(folder) == DEMO_PARTITION:
        return DEMO_PARTITION
    path = Path(folder).expanduser().resolve()
    if not path.is_dir():
        raise FolderError(f"{folder}: not a folder")
    key = str(path)
    if _FORBIDDEN_IN_KEYS & set(key):
        raise FolderError(f"{key}: a folder path may not contain any of | , [ ]")
    return key


def folder_for(partition_key: str) -> Path:
    """The folder a partition key stands for."""
    folder = demo_folder() if partition_key == DEMO_PARTITION else Path(partition_key)
    if not folder.is_dir():
        raise FolderError(f"the folder of partition {partition_key!r} does not exist: {folder}")
    return folder


def list_files(folder: Path) -> Iterator[FileEntry | SkippedEntry]:
    """Supported files below `folder` (hidden ones skipped), and entries that are not read.

    Only regular files whose real path is inside the folder are candidates: symbolic links,
    FIFOs, devices and unreadable files come back as `SkippedEntry` with the reason.
    """
    return iter_folder(folder, suffixes=FORMATS.keys())


def folder_fingerprint(partition_key: str) -> str:
    """A cheap identity of a folder's supported files (names, sizes, modification times).

    The sensor compares it between ticks; it does not read file contents.
    """
    digest = hashlib.sha256()
    for entry in list_files(folder_for(partition_key)):
        line = (
            f"{entry.relative_path}\0{entry.size}\0{entry.mtime_ns}\n"
            if isinstance(entry, FileEntry)
            else f"{entry.relative_path}\0skipped\n"
        )
        digest.update(line.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


class FilesSource(Source):
    """Files of a folder; `max_bytes` bounds what is read of one file."""

    source_type = SOURCE_TYPE
    chain_options = CHAIN_OPTIONS

    def __init__(self, *, max_bytes: int) -> None:
        """Read files of at most `max_bytes` (larger ones are recorded as failed)."""
        self.max_bytes = max_bytes

    def list_documents(self, partition_key: str) -> Iterator[DocumentRef | FailedDocument]:
        """Every supported file of the partition's folder, versioned by size and mtime."""
        folder = folder_for(partition_key)
        for entry in list_files(folder):
            source_id = f"{partition_key}/{entry.relative_path}"
            if not _is_utf8_name(source_id):
                # os.fsdecode smuggled undecodable bytes in; report the name with them replaced.
                shown = source_id.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                yield FailedDocument(shown, "raw", "file name is not valid UTF-8")
            elif isinstance(entry, SkippedEntry):
                yield FailedDocument(source_id, "raw", f"not read: {entry.reason}")
            else:
                yield DocumentRef(
                    source_id=source_id,
                    language="",
                    version=f"{entry.size}:{entry.mtime_ns}",
                    locator=f"{partition_key}\0{entry.relative_path}",
                )

    def fetch(self, refs: Sequence[DocumentRef]) -> Iterator[SourceDocument | FailedDocument]:
        """Read each file: UTF-8 text within the size limit."""
        return fetch_each(refs, self._read)

    def _read(self, ref: DocumentRef) -> SourceDocument | None:
        partition_key, _, relative = ref.locator.partition("\0")
        folder = folder_for(partition_key)
        if not os.path.lexists(folder / relative):
            return None  # deleted since the listing
        data = read_capped(folder, relative, self.max_bytes)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentError(
                f"not valid UTF-8 at byte {exc.start}: {data[exc.start : exc.start + 4]!r}"
            ) from None
        return SourceDocument(
            source_id=ref.source_id,
            language="",
            version=hashlib.sha256(data).hexdigest(),
            title="",
            original_format=FORMATS[Path(relative).suffix.lower()],
            body=text,
            # The demo's address must not depend on where the package is installed.
            url="" if partition_key == DEMO_PARTITION else (folder / relative).as_uri(),
        )


def _is_utf8_name(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
