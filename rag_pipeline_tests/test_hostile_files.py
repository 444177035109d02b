"""Issue 14, what ingestion reads: links, FIFOs, devices and oversized files in a folder."""

import os
import socket
import stat
from pathlib import Path

import pytest

from rag_pipeline.core.safe_files import (
    FileEntry,
    SkippedEntry,
    UnsafeFileError,
    iter_folder,
    read_capped,
)


def _entries(folder: Path, **kwargs: object) -> dict[str, FileEntry | SkippedEntry]:
    return {e.relative_path: e for e in iter_folder(folder, **kwargs)}  # type: ignore[arg-type]


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """A folder with one good file and every kind of entry that must not be read."""
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "good.md").write_text("# Good\n\ntext\n", encoding="utf-8")
    (folder / "sub" / "inner.md").write_text("inner\n", encoding="utf-8")
    (folder / "passwd.md").symlink_to("/etc/passwd")
    (folder / "zero.md").symlink_to("/dev/zero")
    (folder / "dangling.md").symlink_to(folder / "missing.md")
    (folder / "alias.md").symlink_to(folder / "good.md")
    (folder / "etc").symlink_to("/etc", target_is_directory=True)
    os.mkfifo(folder / "pipe.md")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(folder / "sock.md"))
    (folder / ".hidden.md").write_text("hidden\n", encoding="utf-8")
    return folder


def test_only_regular_files_inside_the_folder_are_listed(hostile: Path) -> None:
    entries = _entries(hostile)
    files = sorted(p for p, e in entries.items() if isinstance(e, FileEntry))
    assert files == ["good.md", "sub/inner.md"]
    skipped = {p: e.reason for p, e in entries.items() if isinstance(e, SkippedEntry)}
    assert "outside the folder" in skipped["passwd.md"]
    assert "outside the folder" in skipped["zero.md"]
    assert "dangling" in skipped["dangling.md"]
    assert "inside the folder" in skipped["alias.md"]
    assert "outside the folder" in skipped["etc"]
    assert "FIFO" in skipped["pipe.md"]
    assert "socket" in skipped["sock.md"]
    assert ".hidden.md" not in entries
    # Nothing below the linked /etc is walked.
    assert not any(p.startswith("etc/") for p in entries)


def test_suffix_filter_ignores_other_names_whatever_their_type(hostile: Path) -> None:
    os.mkfifo(hostile / "pipe.bin")
    entries = _entries(hostile, suffixes={".md"})
    assert "pipe.bin" not in entries
    assert isinstance(entries["pipe.md"], SkippedEntry)


def test_a_character_device_is_skipped(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root")
    os.mknod(tmp_path / "null.md", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    (entry,) = iter_folder(tmp_path)
    assert isinstance(entry, SkippedEntry)
    assert "character device" in entry.reason


def test_an_unreadable_file_is_skipped(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    path = tmp_path / "secret.md"
    path.write_text("x", encoding="utf-8")
    path.chmod(0)
    (entry,) = iter_folder(tmp_path)
    assert isinstance(entry, SkippedEntry)
    assert "not readable" in entry.reason


def test_read_capped_reads_a_regular_file(hostile: Path) -> None:
    assert read_capped(hostile, "good.md", 100) == b"# Good\n\ntext\n"
    assert read_capped(hostile, "sub/inner.md", 100) == b"inner\n"


@pytest.mark.parametrize("name", ["passwd.md", "zero.md", "dangling.md", "alias.md"])
def test_read_capped_never_follows_a_link(hostile: Path, name: str) -> None:
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        read_capped(hostile, name, 1 << 20)


def test_read_capped_never_follows_a_linked_folder(hostile: Path) -> None:
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        read_capped(hostile, "etc/passwd", 1 << 20)


def test_read_capped_does_not_block_on_a_fifo(hostile: Path) -> None:
    # Without O_NONBLOCK this open would wait for a writer forever.
    with pytest.raises(UnsafeFileError, match="FIFO"):
        read_capped(hostile, "pipe.md", 1 << 20)


@pytest.mark.parametrize("relative", ["../docs/good.md", "/etc/passwd", "sub/../good.md", ""])
def test_read_capped_refuses_paths_that_leave_the_folder(hostile: Path, relative: str) -> None:
    with pytest.raises(UnsafeFileError):
        read_capped(hostile, relative, 1 << 20)


def test_read_capped_stops_one_byte_past_the_cap(tmp_path: Path) -> None:
    (tmp_path / "big.md").write_bytes(b"x" * 101)
    (tmp_path / "fits.md").write_bytes(b"x" * 100)
    assert len(read_capped(tmp_path, "fits.md", 100)) == 100
    with pytest.raises(UnsafeFileError, match="over the limit of 100"):
        read_capped(tmp_path, "big.md", 100)


def test_read_capped_is_a_value_error() -> None:
    # The files source records any ValueError from a document as that document's failure.
    assert issubclass(UnsafeFileError, ValueError)
