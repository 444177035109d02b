"""Issue 14, errors: each known failure is one line naming the cause and the fix, exit 1."""

import errno
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from rag_pipeline.cli import main
from rag_pipeline.cli.errors import error_message


def _one_line(message: str | None) -> str:
    assert message is not None
    assert "\n" not in message
    assert "Traceback" not in message
    return message


def test_an_unreachable_external_database_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RAG_HOME", str(tmp_path / "home"))
    # Port 1 on loopback: nothing listens, the connection is refused at once.
    monkeypatch.setenv("RAG_VECTORDB_URL", "postgresql://rag@127.0.0.1:1/rag")
    result = CliRunner().invoke(main, ["init"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "cannot reach the vector database" in lines[0]
    assert "RAG_VECTORDB_URL" in lines[0]


def test_a_database_gone_mid_run_is_one_line(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as admin:
        conn = psycopg.connect(database_url, autocommit=True)
        pid = conn.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        with pytest.raises(psycopg.OperationalError) as caught:
            conn.execute("SELECT 1")
        conn.close()
    message = _one_line(error_message(caught.value))
    assert "went away" in message or "cannot reach" in message
    assert "run it again" in message or "server runs" in message


def test_a_full_disk_is_one_line() -> None:
    message = _one_line(
        error_message(OSError(errno.ENOSPC, "No space left on device", "/x/rag.dump"))
    )
    assert "disk is full" in message
    assert "/x/rag.dump" in message
    database = _one_line(error_message(psycopg.errors.DiskFull("could not extend file")))
    assert "disk is full" in database


def test_a_read_only_rag_home_is_one_line() -> None:
    error = OSError(errno.EROFS, "Read-only file system", "/ro/home/models")
    message = _one_line(error_message(error, home="/ro/home"))
    assert "/ro/home is not writable" in message
    assert "RAG_HOME" in message
    denied = PermissionError(errno.EACCES, "Permission denied", "/ro/home/pgdata")
    assert "not writable" in _one_line(error_message(denied, home="/ro/home"))


def test_a_lock_file_of_another_user_is_one_line() -> None:
    error = PermissionError(errno.EACCES, "Permission denied", "/tmp/.lockfile")
    message = _one_line(error_message(error))
    assert "/tmp/.lockfile" in message
    assert "another user" in message


def test_a_bug_keeps_its_traceback() -> None:
    assert error_message(KeyError("x")) is None


@pytest.mark.parametrize(
    "command",
    [["search", "customers"], ["status"], ["init"], ["ask", "what?"], ["validate"]],
)
def test_an_embedded_server_that_cannot_start_is_one_line_everywhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, command: list[str]
) -> None:
    # A data folder PostgreSQL refuses (a version it does not know): every start fails.
    home = tmp_path / "home"
    pgdata = home / "pgdata"
    pgdata.mkdir(parents=True, mode=0o700)
    (pgdata / "PG_VERSION").write_text("99\n")
    (pgdata / "pg_hba.conf").write_text("")
    monkeypatch.setenv("RAG_HOME", str(home))
    monkeypatch.delenv("RAG_VECTORDB_URL", raising=False)
    monkeypatch.delenv("RAG_VECTORDB_PG_HOST", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if "embedded PostgreSQL" in line]
    # Said once, on one line (validate adds a line per check, each says it once at most).
    assert len(lines) == 1, result.output
    assert "pgdata" in lines[0] or "postgres.log" in lines[0]


def test_dagster_storage_failures_are_one_line() -> None:
    import sqlite3

    message = _one_line(error_message(sqlite3.OperationalError("disk I/O error")))
    assert "free space" in message
    assert "DAGSTER_HOME" in message
    wrapped = RuntimeError("step failed")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device", "/h/dagster/x")
    assert "disk is full" in _one_line(error_message(wrapped))


def test_a_server_gone_on_a_full_disk_names_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 49, item 10: the embedded server stops when a WAL write fails on a full disk; the
    # connection error said "the vector database went away … run it again".
    from rag_pipeline.cli import errors

    (tmp_path / "pgdata").mkdir()
    gone = psycopg.OperationalError("server closed the connection unexpectedly")
    assert "went away" in _one_line(error_message(gone, home=str(tmp_path)))
    full = str(tmp_path / "pgdata")
    monkeypatch.setattr(errors, "_no_space_left", lambda path: path == full)
    message = _one_line(error_message(gone, home=str(tmp_path)))
    assert message.startswith("the disk is full: the embedded database cannot be written")
    assert full in message
