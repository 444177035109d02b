"""Issue 14, end to end: what the files source ingests from a hostile folder.

These run the real files job; they rely on the files source reading through
`core.safe_files` (iter_folder / read_capped).
"""

import os
import threading
from pathlib import Path

import dagster as dg

from rag_pipeline.settings import Settings
from rag_pipeline.store.connection import connect
from rag_pipeline_tests.pipeline_helpers import ingest, write

# Time after which a hung ingest is unblocked so that the test can fail instead of hanging.
_HANG_GUARD_SECONDS = 300


def _indexed_text(conninfo: str) -> str:
    with connect(conninfo) as conn:
        rows = conn.execute("SELECT text FROM rag.chunks").fetchall()
    return "\n".join(row[0] for row in rows)


def _failed_ids(conninfo: str) -> set[str]:
    with connect(conninfo) as conn:
        rows = conn.execute("SELECT source_id FROM rag.ingest_errors").fetchall()
    return {row[0] for row in rows}


def test_links_out_of_the_folder_are_never_indexed(
    rag_env: Settings, database_url: str, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    folder = tmp_path / "kb"
    write(folder, "good.md", "# Locators\n\nA locator is a place in a warehouse.\n")
    (folder / "passwd.md").symlink_to("/etc/passwd")
    (folder / "zero.md").symlink_to("/dev/zero")
    (folder / "dangling.md").symlink_to(folder / "gone.md")
    (folder / "etc").symlink_to("/etc", target_is_directory=True)
    ingest(folder, instance)  # succeeds: one bad entry never fails the partition
    text = _indexed_text(database_url)
    assert "A locator is a place in a warehouse." in text
    assert "root:" not in text
    failed = _failed_ids(database_url)
    for name in ("passwd.md", "zero.md", "dangling.md"):
        assert any(source_id.endswith(name) for source_id in failed), failed


def test_a_fifo_does_not_hang_the_run(
    rag_env: Settings, database_url: str, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    folder = tmp_path / "kb"
    write(folder, "good.md", "# Periods\n\nOpen and close periods.\n")
    fifo = folder / "pipe.md"
    os.mkfifo(fifo)
    unblocked = threading.Event()

    def unblock() -> None:
        # Only if the run hangs on the FIFO: give it a writer that closes, so the test
        # fails with a clear assertion instead of hanging the suite.
        unblocked.set()
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)

    guard = threading.Timer(_HANG_GUARD_SECONDS, unblock)
    guard.daemon = True
    guard.start()
    try:
        ingest(folder, instance)
    finally:
        guard.cancel()
    assert not unblocked.is_set(), "the run blocked on a FIFO"
    assert "Open and close periods." in _indexed_text(database_url)
    assert any(source_id.endswith("pipe.md") for source_id in _failed_ids(database_url))
