"""Reading an ingested folder without being steered outside it, blocked or flooded.

A folder handed to `rag ingest` may hold anything a user (or an attacker who can write there)
put in it: a symlink to `/etc/passwd` or `/dev/zero`, a FIFO named `pipe.md`, a dangling
link, a socket. Only regular files whose real path lies inside the folder are documents;
every other entry is reported with a reason, one per entry, so the run goes on.

Decision: every symbolic link is skipped, even one pointing inside the folder — its target
is indexed under its own name, and `read_capped` opens each path component with
`O_NOFOLLOW`, so a link swapped in after the listing is refused rather than followed.
"""

import errno
import os
import stat
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

# O_NONBLOCK: opening a FIFO without a writer would block forever; a regular file ignores it.
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = (
    os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
)
_READ_BLOCK = 1 << 20


class UnsafeFileError(ValueError):
    """A file that must not be read (not regular, outside the folder, too large, unreadable).

    str(error) is the reason a person reads; the document alone fails.
    """


@dataclass(frozen=True)
class FileEntry:
    """A regular file inside the folder: a candidate document.

    Attributes:
        relative_path: The path below the folder, '/'-separated.
        size: Its size in bytes when listed.
        mtime_ns: Its modification time when listed (a cheap version).
    """

    relative_path: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class SkippedEntry:
    """An entry that is not read, with the reason a person reads."""

    relative_path: str
    reason: str


def iter_folder(
    folder: Path, *, suffixes: Collection[str] | None = None, skip_hidden: bool = True
) -> Iterator[FileEntry | SkippedEntry]:
    """Walk `folder` in a stable order without following any symbolic link.

    Args:
        folder: The folder to walk (itself may be reached through a link).
        suffixes: When given, only names ending in one of these (lower-cased, e.g. ".md")
            are considered; other names are ignored silently, whatever their type.
        skip_hidden: Ignore names starting with "." (files and folders), silently.

    Yields:
        A `FileEntry` per regular file, a `SkippedEntry` per other entry (symbolic link,
        FIFO, device, socket, unreadable file or folder).
    """
    root = folder.resolve()
    yield from _walk(root, "", suffixes, skip_hidden)


def _walk(
    root: Path, prefix: str, suffixes: Collection[str] | None, skip_hidden: bool
) -> Iterator[FileEntry | SkippedEntry]:
    try:
        with os.scandir(root / prefix if prefix else root) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except OSError as exc:
        yield SkippedEntry(prefix or ".", f"folder cannot be listed: {exc.strerror}")
        return
    for entry in entries:
        if skip_hidden and entry.name.startswith("."):
            continue
        relative = f"{prefix}/{entry.name}" if prefix else entry.name
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError as exc:
            yield SkippedEntry(relative, f"cannot be examined: {exc.strerror}")
            continue
        if stat.S_ISDIR(info.st_mode):
            yield from _walk(root, relative, suffixes, skip_hidden)
            continue
        if suffixes is not None and Path(entry.name).suffix.lower() not in suffixes:
            continue
        if stat.S_ISLNK(info.st_mode):
            yield SkippedEntry(relative, _link_reason(root, Path(entry.path)))
        elif not stat.S_ISREG(info.st_mode):
            yield SkippedEntry(relative, f"not a regular file ({_kind(info.st_mode)})")
        elif not os.access(entry.path, os.R_OK, follow_symlinks=False):
            yield SkippedEntry(relative, "file is not readable (permission denied)")
        else:
            yield FileEntry(relative, info.st_size, info.st_mtime_ns)


def _link_reason(root: Path, link: Path) -> str:
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):
        return "dangling symbolic link (its target does not exist)"
    if not target.is_relative_to(root):
        return f"symbolic link to {target}, outside the folder (not followed)"
    return "symbolic link inside the folder (not followed; its target is read by its own name)"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "an unknown kind of file"


def read_capped(folder: Path, relative: str, max_bytes: int) -> bytes:
    """Read one regular file below `folder`, never more than `max_bytes`.

    Every component of `relative` is opened relative to the one before with `O_NOFOLLOW`,
    so no symbolic link is followed anywhere on the way; the file is opened non-blocking
    (a FIFO cannot hang the run) and must be a regular file by `fstat` of the open handle.

    Args:
        folder: The ingested folder.
        relative: The '/'-separated path below it (a `FileEntry.relative_path`).
        max_bytes: The most bytes a document may have.

    Returns:
        The file's bytes.

    Raises:
        UnsafeFileError: The path leaves the folder, crosses a link, is not a regular file,
            cannot be opened, or holds more than `max_bytes` bytes.
    """
    parts = relative.split("/")
    if not relative or any(part in ("", ".", "..") for part in parts):
        raise UnsafeFileError(f"{relative!r} is not a plain path inside the folder")
    dir_fd = os.open(folder.resolve(), _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            next_fd = _open_at(part, dir_fd, _DIR_FLAGS, relative)
            os.close(dir_fd)
            dir_fd = next_fd
        fd = _open_at(parts[-1], dir_fd, _OPEN_FLAGS, relative)
    finally:
        os.close(dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFileError(f"not a regular file ({_kind(info.st_mode)})")
        if info.st_size > max_bytes:
            raise UnsafeFileError(_too_large(info.st_size, max_bytes))
        # The size may change after fstat: read at most one byte past the cap to know.
        chunks: list[bytes] = []
        remaining = max_bytes + 1
        while remaining > 0:
            block = os.read(fd, min(remaining, _READ_BLOCK))
            if not block:
                break
            chunks.append(block)
            remaining -= len(block)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise UnsafeFileError(_too_large(len(data), max_bytes, at_least=True))
        return data
    finally:
        os.close(fd)


def _open_at(name: str, dir_fd: int, flags: int, relative: str) -> int:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeFileError(
                f"{relative}: a symbolic link or non-folder on the path (not followed)"
            ) from None
        raise UnsafeFileError(f"{relative}: cannot be opened: {exc.strerror}") from None


def _too_large(size: int, max_bytes: int, *, at_least: bool = False) -> str:
    amount = f"more than {max_bytes:,}" if at_least else f"{size:,}"
    return f"file is {amount} bytes, over the limit of {max_bytes:,} (RAG_FILES_MAX_BYTES)"
