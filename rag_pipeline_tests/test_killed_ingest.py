"""Issue 49 (11): a killed `rag ingest` leaves no run `STARTED` in Dagster's run storage."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from rag_pipeline.cli.run_guard import OWNER_TAG, fail_abandoned_runs
from rag_pipeline.orchestration.instance import dagster_instance
from rag_pipeline.settings import Settings
from rag_pipeline_tests.pipeline_helpers import write

pytestmark = pytest.mark.integration

_RUNNING = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING]


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "many"
    for n in range(300):
        body = f"# Note {n}\n\n" + " ".join(f"word{n}x{k}" for k in range(300)) + "\n"
        write(folder, f"note-{n}.md", body)
    return folder


def _start(folder: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rag_pipeline.cli", "ingest", "--path", str(folder), *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _started_run(instance: Any, process: subprocess.Popen[str], but: str = "") -> Any:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        runs = instance.get_runs(filters=dg.RunsFilter(statuses=_RUNNING))
        runs = [r for r in runs if r.run_id != but]
        if runs:
            return runs[0]
        assert process.poll() is None, process.communicate()
        time.sleep(0.2)
    raise AssertionError("no run started")


@pytest.fixture
def env(rag_env: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    return dict(os.environ)


def test_sigterm_marks_the_run_canceled_and_says_so(
    rag_env: Settings, env: dict[str, str], tmp_path: Path
) -> None:
    folder = _folder(tmp_path)
    instance = dagster_instance(rag_env)
    process = _start(folder, env)
    run = _started_run(instance, process)
    assert run.tags[OWNER_TAG].split(":")[1] == str(process.pid)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGTERM
    assert "stopped by SIGTERM" in stderr
    assert "Traceback" not in stderr
    ended = instance.get_run_by_id(run.run_id)
    assert ended.status == dg.DagsterRunStatus.CANCELED


def test_a_run_left_started_by_a_killed_process_is_failed_at_the_next_start(
    rag_env: Settings, env: dict[str, str], tmp_path: Path
) -> None:
    folder = _folder(tmp_path)
    instance = dagster_instance(rag_env)
    process = _start(folder, env)
    run = _started_run(instance, process)
    process.kill()
    process.communicate(timeout=120)
    assert instance.get_run_by_id(run.run_id).status in _RUNNING  # nobody told the storage
    # A live process's run is left alone.
    alive = _start(folder, env)
    live = _started_run(instance, alive, but=run.run_id)
    if instance.get_run_by_id(run.run_id).status in _RUNNING:  # the new process got there first
        assert fail_abandoned_runs(instance) == [run.run_id]
    failed = instance.get_run_by_id(run.run_id)
    assert failed.status == dg.DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(live.run_id).status in _RUNNING
    alive.send_signal(signal.SIGTERM)
    alive.communicate(timeout=120)
