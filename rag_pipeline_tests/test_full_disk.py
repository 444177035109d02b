"""A full disk, for real: RAG_HOME and DAGSTER_HOME on a small tmpfs, `rag` in a subprocess.

Hardening round 3, finding 10: on a full disk the first run exited 1 with no reason, the next
printed a 90-line SQLite traceback, and `rag search` while the server could not start printed
41 lines. `test_hostile_errors.py` checks the messages with simulated errors; here the disk
fills for real (a tmpfs, so root is needed to mount it), then space is freed and the next run
must succeed with nothing lost and nothing twice.
"""

import errno
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path

import psycopg
import pytest

import rag_pipeline
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.store.server import resolve_conninfo, stop_embedded_server
from rag_pipeline_tests.pipeline_helpers import write

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root"),
]

# initdb alone needs about 40 MB (a 16 MB WAL segment among them): in 16 MB the data folder
# cannot be created. 256 MB holds the demo corpus' index several times over.
_TOO_SMALL = "16m"
_ENOUGH = "256m"
_DEMO_DOCUMENTS = 9
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Disk:
    """A mounted tmpfs holding RAG_HOME and DAGSTER_HOME."""

    mount_point: Path
    env: dict[str, str]
    settings: Settings

    def rag(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run the real `rag` command, as a user would, in a process of its own."""
        return subprocess.run(
            [sys.executable, "-m", "rag_pipeline.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
            cwd=self.mount_point.parent,
            check=False,
        )

    def resize(self, size: str) -> None:
        resized = _mount(["-o", f"remount,size={size}", str(self.mount_point)])
        assert resized.returncode == 0, resized.stderr

    def fill(self) -> Path:
        """Write zeros until the disk is full; the file is deleted to free the space."""
        filler = self.mount_point / "filler"
        block = b"\0" * (1 << 20)
        with filler.open("wb", buffering=0) as out:
            while True:
                try:
                    out.write(block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    block = block[: len(block) // 2]
                    if not block:
                        break
        assert os.statvfs(self.mount_point).f_bavail == 0
        return filler


def _mount(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Disk]:
    """A tmpfs of `_TOO_SMALL`, unmounted (its embedded server stopped) at the end."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = _mount(["-t", "tmpfs", "-o", f"size={_TOO_SMALL}", "tmpfs", str(mount_point)])
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    home = mount_point / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "DAGSTER_"))}
    package_root = str(Path(rag_pipeline.__file__).parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env["RAG_HOME"] = str(home)
    env["DAGSTER_HOME"] = str(mount_point / "dagster")
    settings = load_settings(home=home, vectordb_url=None, vectordb_pg_host=None)
    try:
        yield Disk(mount_point, env, settings)
    finally:
        with suppress(Exception):
            stop_embedded_server(settings)
        if subprocess.run(["umount", str(mount_point)], check=False).returncode != 0:
            subprocess.run(["umount", "--lazy", str(mount_point)], check=False)


def _one_line_about_the_full_disk(done: subprocess.CompletedProcess[str]) -> str:
    """The failed command's message: no traceback, one line, naming the full disk."""
    assert done.returncode != 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = done.stderr.strip().splitlines()
    assert 1 <= len(lines) <= 2, done.stderr
    message = " ".join(lines)
    assert "disk is full" in message or "no space left" in message.lower(), message
    return message


def _index_counts(settings: Settings) -> tuple[int, int, int]:
    """Documents, distinct (source, key) pairs among them, and chunks."""
    with psycopg.connect(resolve_conninfo(settings)) as conn:
        row = conn.execute(
            "SELECT count(*), count(DISTINCT (source_type, doc_key)),"
            " (SELECT count(*) FROM rag.chunks) FROM rag.documents"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def test_a_disk_too_small_for_the_database_says_so_then_works(disk: Disk) -> None:
    messages = [_one_line_about_the_full_disk(disk.rag("ingest", "--source", "files"))]
    messages.append(_one_line_about_the_full_disk(disk.rag("ingest", "--source", "files")))
    messages.append(_one_line_about_the_full_disk(disk.rag("init")))
    messages.append(_one_line_about_the_full_disk(disk.rag("search", "foo")))
    _log.info("what a user sees:\n%s", "\n".join(messages))

    disk.resize(_ENOUGH)
    first = disk.rag("ingest", "--source", "files")
    assert first.returncode == 0, first.stderr
    assert f"{_DEMO_DOCUMENTS} new, 0 changed, 0 unchanged" in first.stdout
    again = disk.rag("ingest", "--source", "files")
    assert again.returncode == 0, again.stderr
    assert f"0 new, 0 changed, {_DEMO_DOCUMENTS} unchanged" in again.stdout
    documents, distinct, chunks = _index_counts(disk.settings)
    assert documents == distinct == _DEMO_DOCUMENTS
    assert chunks > 0


def test_a_disk_that_fills_after_the_first_ingest_says_so_then_works(
    disk: Disk, tmp_path: Path
) -> None:
    disk.resize(_ENOUGH)
    first = disk.rag("ingest", "--source", "files")
    assert first.returncode == 0, first.stderr
    before = _index_counts(disk.settings)
    assert before[:2] == (_DEMO_DOCUMENTS, _DEMO_DOCUMENTS)
    folder = tmp_path / "notes"
    write(folder, "locators.md", "# Locators\n\nA locator is a place in a warehouse.\n")

    # The server stopped, as after a reboot: on the full disk it cannot start again.
    assert disk.rag("stop").returncode == 0
    filler = disk.fill()
    messages = [_one_line_about_the_full_disk(disk.rag("ingest", "--path", str(folder)))]
    messages.append(_one_line_about_the_full_disk(disk.rag("ingest", "--path", str(folder))))
    messages.append(_one_line_about_the_full_disk(disk.rag("search", "foo")))
    messages.append(_one_line_about_the_full_disk(disk.rag("status")))
    _log.info("what a user sees:\n%s", "\n".join(messages))

    filler.unlink()
    added = disk.rag("ingest", "--path", str(folder))
    assert added.returncode == 0, added.stderr
    assert "1 new, 0 changed, 0 unchanged" in added.stdout
    demo = disk.rag("ingest", "--source", "files")
    assert demo.returncode == 0, demo.stderr
    assert f"0 new, 0 changed, {_DEMO_DOCUMENTS} unchanged" in demo.stdout
    documents, distinct, chunks = _index_counts(disk.settings)
    assert documents == distinct == _DEMO_DOCUMENTS + 1
    assert chunks > before[2]
    found = disk.rag("search", "locator warehouse", "--json")
    assert found.returncode == 0, found.stderr


def test_a_disk_that_fills_during_an_ingest_ends_with_one_line_naming_it(
    disk: Disk, tmp_path: Path
) -> None:
    # Issue 49, item 10: with the server running, a disk filling during the run ended with
    # "the vector database went away … run it again" after 100 lines of tracebacks. Only the
    # database's disk fills here: Dagster's run storage is elsewhere.
    disk = replace(disk, env={**disk.env, "DAGSTER_HOME": str(tmp_path / "dagster")})
    disk.resize(_ENOUGH)
    first = disk.rag("ingest", "--source", "files")
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "many"
    for n in range(40):
        write(folder, f"note-{n}.md", f"# Note {n}\n\n" + f"Words of note {n}. " * 400 + "\n")
    filler = disk.fill()  # the server keeps running
    message = _one_line_about_the_full_disk(disk.rag("ingest", "--path", str(folder)))
    _log.info("what a user sees: %s", message)
    assert "went away" not in message
    filler.unlink()
    disk.rag("stop")  # a server that stopped on the full disk starts again
    again = disk.rag("ingest", "--path", str(folder))
    assert again.returncode == 0, again.stderr
    assert "40 new" in again.stdout or "unchanged" in again.stdout
