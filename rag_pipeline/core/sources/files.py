"""The `files` source: a local folder of Markdown, HTML, Editor.js JSON and text files."""

import hashlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline.core.incremental import StageOutput, StageRecord, record_failure
from rag_pipeline.core.models import SourceFormat

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
# Dagster partition keys may not contain these.
_FORBIDDEN_IN_KEYS = set("|,[]")


class FolderError(ValueError):
    """The folder of a `files` partition cannot be used."""


@dataclass(frozen=True)
class FileEntry:
    """A candidate document in the folder."""

    source_id: str  # path relative to the folder, '/'-separated
    path: Path
    size: int
    format: SourceFormat


def demo_folder() -> Path:
    """The demo corpus shipped inside the package."""
    return Path(__file__).resolve().parents[2] / "demo" / "files"


def partition_key_for(folder: str | Path) -> str:
    """The partition key of a folder: `demo` for the bundled corpus, else its absolute path."""
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


def list_files(folder: Path) -> Iterator[FileEntry]:
    """Supported files below `folder`, hidden files and folders skipped, in a stable order."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            suffix = Path(name).suffix.lower()
            if name.startswith(".") or suffix not in FORMATS:
                continue
            path = Path(root) / name
            relative = path.relative_to(folder).as_posix()
            yield FileEntry(relative, path, path.stat().st_size, FORMATS[suffix])


def read_folder(
    partition_key: str,
    previous_hashes: Mapping[str, str],
    *,
    max_bytes: int,
    force: bool = False,
) -> StageOutput:
    """Read the folder into raw records: unchanged files (same bytes) are only hashed.

    `previous_hashes` are the raw content hashes stored by the last run; a file that cannot be
    read (too large, not UTF-8, a file name that is not UTF-8) is recorded as failed.
    """
    folder = folder_for(partition_key)
    output = StageOutput(SOURCE_TYPE, partition_key, previous_keys=frozenset(previous_hashes))
    for entry in list_files(folder):
        if not _is_utf8_name(entry.source_id):
            # os.fsdecode smuggled undecodable bytes in; report the name with them replaced.
            shown = entry.source_id.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            record_failure(output, shown, "raw", "file name is not valid UTF-8", previous_hashes)
            continue
        if entry.size > max_bytes:
            record_failure(
                output,
                entry.source_id,
                "raw",
                f"file is {entry.size:,} bytes, over the limit of {max_bytes:,} "
                "(RAG_FILES_MAX_BYTES)",
                previous_hashes,
            )
            continue
        try:
            data = entry.path.read_bytes()
        except OSError as exc:
            record_failure(output, entry.source_id, "raw", exc, previous_hashes)
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            record_failure(
                output,
                entry.source_id,
                "raw",
                f"not valid UTF-8 at byte {exc.start}: {data[exc.start : exc.start + 4]!r}",
                previous_hashes,
            )
            continue
        version = hashlib.sha256(data).hexdigest()
        record = StageRecord(
            doc_key=entry.source_id,
            meta={
                "source_type": SOURCE_TYPE,
                "source_id": entry.source_id,
                "language": "",
                "original_format": entry.format.value,
                "source_version": version,
                "url": entry.path.as_uri(),
            },
            body=text.removeprefix("\ufeff"),
        )
        if not force and previous_hashes.get(entry.source_id) == record.content_hash:
            output.kept.add(entry.source_id)
        else:
            output.changed[entry.source_id] = (version, record)
    return output


def folder_fingerprint(partition_key: str) -> str:
    """A cheap identity of a folder's supported files (names, sizes, modification times).

    The sensor compares it between ticks; it does not read file contents.
    """
    digest = hashlib.sha256()
    for entry in list_files(folder_for(partition_key)):
        stat = entry.path.stat()
        digest.update(
            f"{entry.source_id}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode(
                "utf-8", "surrogateescape"
            )
        )
    return digest.hexdigest()


def _is_utf8_name(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
