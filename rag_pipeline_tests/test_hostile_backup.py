"""Issue 14, backup and restore: private dumps, all-or-nothing restore, no psql meta-commands."""

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import psutil
import pytest
from click.testing import CliRunner

from rag_pipeline.cli import main
from rag_pipeline.settings import Settings
from rag_pipeline.store import backup
from rag_pipeline.store.connection import connect
from rag_pipeline_tests.pipeline_helpers import ingest, write

pytestmark = pytest.mark.integration


@pytest.fixture
def indexed(rag_env: Settings, database_url: str, instance: dg.DagsterInstance, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A database holding two ingested documents."""
    write(tmp_path / "kb", "a.md", "# Period control\n\nOpen and close accounting periods.\n")
    write(tmp_path / "kb", "b.md", "# Warehouses\n\nLocators hold the stock of a warehouse.\n")
    ingest(tmp_path / "kb", instance)
    return database_url


def _state(conninfo: str) -> tuple[int, bool, int]:
    """Documents, whether the HNSW index exists, and how many constraints schema rag has."""
    with connect(conninfo) as conn:
        documents = conn.execute("SELECT count(*) FROM rag.documents").fetchone()
        index = conn.execute("SELECT to_regclass('rag.chunks_embedding_hnsw')").fetchone()
        constraints = conn.execute(
            "SELECT count(*) FROM pg_constraint c JOIN pg_namespace n"
            " ON n.oid = c.connamespace WHERE n.nspname = 'rag'"
        ).fetchone()
    assert documents
    assert index
    assert constraints
    return int(documents[0]), index[0] is not None, int(constraints[0])


def _restore(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["restore", "-y", str(path)])
    return result.exit_code, result.output


@pytest.mark.parametrize("fmt", ["custom", "plain"])
def test_dumps_are_private(indexed: str, tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"kb.{fmt}"
    backup.dump(indexed, path, "custom" if fmt == "custom" else "plain")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_plain_dump_truncated_at_a_line_boundary_is_refused(indexed: str, tmp_path: Path) -> None:
    before = _state(indexed)
    dump = tmp_path / "kb.sql"
    backup.dump(indexed, dump, "plain")
    lines = dump.read_text(encoding="utf-8").splitlines(keepends=True)
    # Cut after the data, before the constraints and indexes, at a line boundary.
    cut = next(i for i, line in enumerate(lines) if line.startswith("ALTER TABLE ONLY"))
    truncated = tmp_path / "truncated.sql"
    truncated.write_text("".join(lines[:cut]), encoding="utf-8")
    code, output = _restore(truncated)
    assert code == 1, output
    assert "truncated" in output
    assert _state(indexed) == before


@pytest.mark.parametrize("where", ["middle", "end"])
def test_psql_meta_commands_in_a_plain_dump_never_run(
    indexed: str, tmp_path: Path, where: str
) -> None:
    before = _state(indexed)
    dump = tmp_path / "kb.sql"
    backup.dump(indexed, dump, "plain")
    witness = tmp_path / "pwned"
    lines = dump.read_text(encoding="utf-8").splitlines(keepends=True)
    payload = [f"\\! touch {witness}\n"]
    at = len(lines) // 2 if where == "middle" else len(lines)
    crafted = tmp_path / "crafted.sql"
    crafted.write_text("".join(lines[:at] + payload + lines[at:]), encoding="utf-8")
    code, output = _restore(crafted)
    assert code == 1, output
    assert not witness.exists()
    assert _state(indexed) == before


def test_a_dump_without_the_restrict_guard_is_refused(indexed: str, tmp_path: Path) -> None:
    crafted = tmp_path / "handmade.sql"
    crafted.write_text("SELECT 1;\n", encoding="utf-8")
    with pytest.raises(backup.BackupError, match="restrict"):
        backup.check_plain_dump(crafted)


@pytest.mark.parametrize("fmt", ["custom", "plain"])
def test_a_good_restore_replaces_everything(indexed: str, tmp_path: Path, fmt: str) -> None:
    dump = tmp_path / "kb.dump"
    backup.dump(indexed, dump, "custom" if fmt == "custom" else "plain")
    before = _state(indexed)
    with connect(indexed) as conn:
        conn.execute("DELETE FROM rag.documents WHERE title = 'Warehouses'")
        conn.commit()
    assert _state(indexed)[0] == before[0] - 1
    code, output = _restore(dump)
    assert code == 0, output
    assert _state(indexed) == before


def _runs_pg_restore(pid: int) -> bool:
    """Whether a descendant of `pid` is pg_restore (children come and go while we look)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return False
    for child in children:
        try:
            if child.name() == "pg_restore":
                return True
        except psutil.NoSuchProcess:
            continue
    return False


def test_killing_a_restore_half_way_leaves_old_or_new_data_never_a_broken_one(
    indexed: str, rag_env: Settings, tmp_path: Path
) -> None:
    dump = tmp_path / "kb.dump"
    backup.dump(indexed, dump, "custom")
    full = _state(indexed)
    with connect(indexed) as conn:
        conn.execute("DELETE FROM rag.documents WHERE title = 'Warehouses'")
        conn.commit()
    edited = _state(indexed)
    process = subprocess.Popen(
        [sys.executable, "-m", "rag_pipeline.cli", "restore", "-y", str(dump)],
        env=os.environ.copy(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Kill it as soon as pg_restore runs (or whenever it ends, if that was too quick).
        deadline = time.monotonic() + 120
        while process.poll() is None and time.monotonic() < deadline:
            if _runs_pg_restore(process.pid):
                break
            time.sleep(0.01)
    finally:
        with_group = process.poll() is None
        if with_group:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert _state(indexed) in (full, edited)
