"""The `files` source: a local folder of Markdown, HTML, Editor.js JSON and text files.

A partition is a named folder: `demo` for the corpus shipped in the package, else a name the
user gave (`rag folders add docs ~/docs`) or `rag ingest --path` derived; where each name's
folder is on this machine is kept in the database (`store/folders.py`). A document is a file,
named `<folder name>/<relative path>`, so its identity holds no path: a folder can move or be
restored on another machine and re-pointing its name re-ingests nothing. Its cheap version is
its size and modification time; its language comes from its front matter.
"""

import hashlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
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
from rag_pipeline.store.folders import FolderError

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
# Where a registered name's folder is (None: not registered).
FolderLookup = Callable[[str], Path | None]


def demo_folder() -> Path:
    """The demo corpus shipped inside the package."""
    return Path(__file__).resolve().parents[1] / "demo" / "files"


def resolve_folder(folder: str | Path) -> Path:
    """The real path of a folder given on the command line or in settings."""
    path = Path(folder).expanduser().resolve()
    if not path.is_dir():
        raise FolderError(f"{folder}: not a folder")
    return path


def folder_for(partition_key: str, lookup: FolderLookup) -> Path:
    """The folder a partition (a folder name) stands for on this machine."""
    if partition_key == DEMO_PARTITION:
        return demo_folder()
    folder = lookup(partition_key)
    if folder is None:
        raise FolderError(
            f"no folder is registered as {partition_key!r}: rag folders add {partition_key} PATH"
        )
    if not folder.is_dir():
        raise FolderError(
            f"the folder of {partition_key!r} does not exist: {folder}; if it moved, re-point "
            f"it with `rag folders add {partition_key} NEWPATH`"
        )
    return folder


def list_files(folder: Path) -> Iterator[FileEntry | SkippedEntry]:
    """Supported files below `folder` (hidden ones skipped), and entries that are not read.

    Only regular files whose real path is inside the folder are candidates: symbolic links,
    FIFOs, devices and unreadable files come back as `SkippedEntry` with the reason.
    """
    return iter_folder(folder, suffixes=FORMATS.keys())


def folder_fingerprint(folder: Path) -> str:
    """A cheap identity of a folder's supported files (names, sizes, modification times).

    The sensor compares it between ticks; it does not read file contents.
    """
    digest = hashlib.sha256()
    for entry in list_files(folder):
        line = (
            f"{entry.relative_path}\0{entry.size}\0{entry.mtime_ns}\n"
            if isinstance(entry, FileEntry)
            else f"{entry.relative_path}\0skipped\n"
        )
        digest.update(line.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _content_version(path: Path) -> str:
    """A version from a (small, bundled) file's bytes, the same in every copy of it."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:32]


class FilesSource(Source):
    """Files of a named folder; `max_bytes` bounds what is read of one file."""

    source_type = SOURCE_TYPE
    chain_options = CHAIN_OPTIONS

    def __init__(self, *, max_bytes: int, folders: FolderLookup) -> None:
        """Read files of at most `max_bytes` (larger ones are recorded as failed) from the
        folders `folders` names."""
        self.max_bytes = max_bytes
        self.folders = folders

    def folder_for(self, partition_key: str) -> Path:
        """The folder of a partition on this machine."""
        return folder_for(partition_key, self.folders)

    def list_documents(self, partition_key: str) -> Iterator[DocumentRef | FailedDocument]:
        """Every supported file of the partition's folder, versioned by size and mtime.

        The bundled demo files are versioned by their content instead: a copy of the package
        (an installed wheel beside the clone) has other mtimes, and must not re-fetch them.
        """
        folder = self.folder_for(partition_key)
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
                    version=(
                        _content_version(folder / entry.relative_path)
                        if partition_key == DEMO_PARTITION
                        else f"{entry.size}:{entry.mtime_ns}"
                    ),
                    locator=f"{partition_key}\0{entry.relative_path}",
                )

    def fetch(self, refs: Sequence[DocumentRef]) -> Iterator[SourceDocument | FailedDocument]:
        """Read each file: UTF-8 text within the size limit."""
        return fetch_each(refs, self._read)

    def _read(self, ref: DocumentRef) -> SourceDocument | None:
        partition_key, _, relative = ref.locator.partition("\0")
        folder = self.folder_for(partition_key)
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
