"""The `rag` command on the embedded database, including a run killed half-way."""

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from rag_pipeline.cli import main
from rag_pipeline.settings import load_settings
from rag_pipeline.store.connection import connect
from rag_pipeline.store.server import resolve_conninfo
from rag_pipeline_tests.pipeline_helpers import write

pytestmark = pytest.mark.integration


@pytest.fixture
def cli_env(
    monkeypatch: pytest.MonkeyPatch, rag_home: Path, pg_admin_uri: str
) -> Iterator[dict[str, str]]:
    """The embedded default: only RAG_HOME set (the session's server, database `rag`)."""
    for name in list(os.environ):
        if name.startswith("RAG_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RAG_HOME", str(rag_home))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    conninfo = resolve_conninfo(load_settings())
    with connect(conninfo) as conn:
        conn.execute("DROP SCHEMA IF EXISTS rag CASCADE")
    from rag_pipeline.store import runtime

    runtime._ready.clear()  # the schema is gone: migrate again
    yield {"RAG_HOME": str(rag_home)}
    monkeypatch.delenv("DAGSTER_HOME", raising=False)


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_help_everywhere() -> None:
    for command in ([], ["init"], ["ingest"], ["search"], ["status"], ["clear"], ["stop"], ["dev"]):
        output = _invoke(*command, "--help")
        assert "Usage:" in output


def test_demo_ingest_search_status_clear(cli_env: dict[str, str]) -> None:
    output = _invoke("init")
    assert "embedded PostgreSQL" in output
    assert "all-MiniLM-L6-v2-int8 (384 dimensions, max 256 tokens)" in output

    output = _invoke("ingest")
    assert "files/demo: 9 new, 0 changed, 0 unchanged, 0 deleted, 0 failed documents" in output
    # The run observed its source system, and the command recorded ingest_errors.
    import dagster as dg

    from rag_pipeline.orchestration.instance import dagster_instance

    with dagster_instance(load_settings()) as instance:
        observed = instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("folders"), asset_partitions=["demo"]),
            limit=1,
        ).records
        assert len(observed) == 1
        assert instance.get_latest_materialization_event(dg.AssetKey("ingest_errors"))

    output = _invoke("ingest")
    assert "0 new, 0 changed, 9 unchanged" in output
    assert " 0 chunks embedded" in output

    hits = json.loads(
        _invoke("search", "How do I set up locators in a warehouse?", "--json", "-k", "3")
    )
    assert len(hits) == 3
    assert hits[0]["source_id"] == "demo/warehouse-and-locators.md"
    assert set(hits[0]) >= {
        "source_type",
        "source_id",
        "language",
        "title",
        "breadcrumb",
        "section_title",
        "url",
        "score",
        "text",
        "parent_text",
    }
    human = _invoke("search", "allocate a payment to invoices", "-k", "1")
    assert "Allocating" in human

    status = _invoke("status")
    assert "files" in status
    assert "9 documents" in status
    assert ", 1 partition, " in status

    # The checks alone on the partition, as a run of their own.
    checks = _invoke("check", "--source", "files", "--partition", "demo")
    assert "PASS  index_integrity: files/demo: " in checks
    assert "PASS  no_failed_documents: files/demo: no document failed" in checks
    assert "all-MiniLM-L6-v2-int8 (384 dimensions)" in status

    assert "deleted 9 documents of files" in _invoke("clear", "--source", "files", "-y")
    assert "index:    empty" in _invoke("status")


def test_bad_configuration_is_one_clear_line(
    cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_VECTORDB_PG_PORT", "abc")
    result = CliRunner().invoke(main, ["status"])
    assert result.exit_code == 1
    assert "RAG_VECTORDB_PG_PORT" in result.output
    assert "Traceback" not in result.output


def test_killed_run_leaves_previous_version_searchable(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    folder = tmp_path / "big"
    for i in range(60):
        write(
            folder, f"doc{i:03}.md", f"# Topic {i}\n\nVersion one of document {i} about locators.\n"
        )
    _invoke("ingest", "--path", str(folder))
    conninfo = resolve_conninfo(load_settings())
    with connect(conninfo) as conn:
        before = conn.execute(
            "SELECT source_id, content_hash FROM rag.documents ORDER BY 1"
        ).fetchall()
        cached = conn.execute("SELECT count(*) FROM rag.embedding_cache").fetchone()[0]  # type: ignore[index]

    # Version two: enough new text that embedding takes several batches.
    for i in range(60):
        body = "\n\n".join(
            f"## Part {p}\n\nVersion two, part {p} of document {i}: stock moves between locators "
            f"{i * 100 + p} with quantities and dates."
            for p in range(40)
        )
        write(folder, f"doc{i:03}.md", f"# Topic {i}\n\n{body}\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "rag_pipeline.cli", "ingest", "--path", str(folder)],
        env={**os.environ, **cli_env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with connect(conninfo) as conn:
                now = conn.execute("SELECT count(*) FROM rag.embedding_cache").fetchone()[0]  # type: ignore[index]
            if now > cached:
                break  # the first batch of new vectors is stored: embedding is under way
            assert process.poll() is None, "the run ended before it could be killed"
            time.sleep(0.05)
        else:
            raise AssertionError("embedding never started")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)

    with connect(conninfo) as conn:
        after = conn.execute(
            "SELECT source_id, content_hash FROM rag.documents ORDER BY 1"
        ).fetchall()
    assert after == before
    hits = json.loads(_invoke("search", "version one of document 7", "--json", "-k", "1"))
    assert "Version one" in hits[0]["text"]

    # The next run finishes the work and reuses the vectors the killed run had cached.
    output = _invoke("ingest", "--path", str(folder))
    assert "60 changed" in output
    reused = int(output.split(" chunks embedded, ")[1].split(" reused")[0])
    assert reused > 0


def test_an_ingest_of_a_partition_already_running_exits_with_a_clear_message(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    from rag_pipeline.store.locks import advisory_lock

    folder = tmp_path / "busy"
    write(folder, "a.md", "# A\n\nLocators hold stock.\n")
    conninfo = resolve_conninfo(load_settings())
    _invoke("init")
    key = "busy"  # the folder's name: its partition
    # Another ingest of the same folder holds the partition's run lock.
    with (
        connect(conninfo, autocommit=True) as other,
        advisory_lock(other, "run", "files", key, wait=False) as held,
    ):
        assert held
        result = CliRunner().invoke(main, ["ingest", "--path", str(folder)])
        assert result.exit_code == 1
        assert "already being ingested by another process" in result.output
        assert "Traceback" not in result.output
    with connect(conninfo) as conn:
        assert conn.execute("SELECT count(*) FROM rag.documents").fetchone() == (0,)
    assert "1 new" in _invoke("ingest", "--path", str(folder))


def test_two_concurrent_ingests_of_one_folder_end_with_one_result(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    folder = tmp_path / "race"
    for i in range(30):
        write(folder, f"doc{i:02}.md", f"# Topic {i}\n\nDocument {i} about locator {i}.\n")
    _invoke("init")
    command = [sys.executable, "-m", "rag_pipeline.cli", "ingest", "--path", str(folder)]
    runs = [
        subprocess.Popen(
            command, env={**os.environ, **cli_env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        for _ in range(2)
    ]
    # Generous: two model loads and runs share two cores with whatever else the machine does.
    outputs = [run.communicate(timeout=900)[0].decode() for run in runs]
    codes = sorted(run.returncode for run in runs)
    joined = "\n".join(outputs)
    assert "UniqueViolation" not in joined
    assert "Traceback" not in joined
    # Either they overlapped (one refused) or the second found everything done.
    assert (codes == [0, 1] and "already being ingested" in joined) or (
        codes == [0, 0] and "30 unchanged" in joined
    )
    with connect(resolve_conninfo(load_settings())) as conn:
        assert conn.execute("SELECT count(*) FROM rag.documents").fetchone() == (30,)


def test_an_ingest_started_with_sigterm_ignored_ends_and_leaves_no_process(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    # Children inherit an ignored SIGTERM; Dagster stops each step's `tail -F` with SIGTERM.
    folder = tmp_path / "ignored"
    write(folder, "one.md", "# One\n\nA document ingested with SIGTERM ignored.\n")
    command = [sys.executable, "-m", "rag_pipeline.cli", "ingest", "--path", str(folder)]
    done = subprocess.run(
        command,
        env={**os.environ, **cli_env},
        capture_output=True,
        text=True,
        # Not a speed check: without the fix the tails hold the pipes and this never returns.
        timeout=600,
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN),
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 new" in done.stdout
    running = (" ".join(p.info["cmdline"] or ()) for p in psutil.process_iter(["cmdline"]))
    assert not [c for c in running if "tail" in c and cli_env["RAG_HOME"] in c]


def test_the_readme_ci_recipe_runs_as_written(cli_env: dict[str, str], tmp_path: Path) -> None:
    env = {**os.environ, **cli_env, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    bin_dir = Path(sys.executable).parent

    def run(*args: str) -> str:
        done = subprocess.run(
            args, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    assert "demo" in run(str(bin_dir / "rag"), "folders", "add", "demo")
    output = run(
        str(bin_dir / "dagster"),
        "job",
        "execute",
        "-m",
        "rag_pipeline.definitions",
        "-j",
        "files_ingest_job",
        "--tags",
        '{"dagster/partition": "demo"}',
    )
    assert "RUN_SUCCESS" in output
    assert "code location name" not in output
    hits = json.loads(_invoke("search", "allocate a payment to invoices", "--json", "-k", "1"))
    assert hits[0]["source_id"] == "demo/payment-allocation.json"
