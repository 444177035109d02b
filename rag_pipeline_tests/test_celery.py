"""Ingesting everything on Celery: two worker processes on the local broker build the same index.

The workers are real `celery worker` processes of dagster-celery's app on RabbitMQ
(127.0.0.1:5672, guest/guest); the runs are `rag ingest --source all` with
`RAG_EXECUTOR=celery`; the result is compared with the in-process runs (ops_support).
"""

import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_pipeline_tests.ops_support import (
    IngestAllRun,
    drop_database,
    execute_ingest_all,
    index_snapshot,
    ingest_all_in_process,  # noqa: F401 - the session's in-process run, the reference
    new_database,
    ops_env,
    vectors,
)

pytest.importorskip("dagster_celery", reason="dagster-celery is not installed (the celery extra)")

BROKER = "pyamqp://guest:guest@127.0.0.1:5672//"


def _broker_answers() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5672), timeout=2):
            return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(
    not _broker_answers(), reason="no RabbitMQ broker answers on 127.0.0.1:5672"
)


def _celery(*args: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "dagster_celery.app", "-b", BROKER, *args]


@pytest.fixture
def workers(tmp_path: Path, rag_home: Path, pg_admin_uri: str) -> Iterator[tuple[str, Path]]:
    """Two Celery workers sharing a new vector database and Dagster instance."""
    url = new_database(pg_admin_uri)
    work = tmp_path / "celery"
    (work / "dagster_home").mkdir(parents=True)
    env = ops_env(rag_home, url, work / "dagster_home", RAG_EXECUTOR="celery")
    # Tasks left on the queue by an interrupted run elsewhere must not reach these workers.
    subprocess.run([*_celery("purge", "-f", "-Q", "dagster")], env=env, check=False)
    processes = [
        subprocess.Popen(
            # `-P solo`: the task runs in the worker's main process, so the stages may start
            # their own process pool (the default prefork children are daemons and may not).
            _celery(
                "worker",
                "-P",
                "solo",
                "-Q",
                "dagster",
                "-n",
                f"rag-test-{n}-{os.getpid()}@%h",  # unique: another run may share the broker
                "--prefetch-multiplier=1",
                "-l",
                "INFO",
            ),
            env=env,
            stdout=(work / f"worker{n}.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        for n in (1, 2)
    ]
    try:
        _wait_until_ready(work, processes)
        yield url, work
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        drop_database(pg_admin_uri, url)


def _wait_until_ready(work: Path, processes: list[subprocess.Popen[bytes]]) -> None:
    """Both workers listen on the queue (else the first one would take every task)."""
    deadline = time.monotonic() + 120
    while True:
        logs = [(work / f"worker{n}.log").read_text() for n in (1, 2)]
        if all(" ready." in log for log in logs):
            return
        if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
            pytest.fail(f"the Celery workers did not start: {logs}")
        time.sleep(0.5)


def test_ingest_all_on_two_celery_workers_builds_the_in_process_index(
    workers: tuple[str, Path],
    rag_home: Path,
    ingest_all_in_process: IngestAllRun,  # noqa: F811
) -> None:
    url, work = workers
    assert ingest_all_in_process.returncode == 0, ingest_all_in_process.output[-3000:]
    run = execute_ingest_all(rag_home, url, work / "run", RAG_EXECUTOR="celery")
    assert run.returncode == 0, run.output[-3000:]
    # The steps ran on the workers, both of them, not in the launching process.
    for n in (1, 2):
        log = (work / f"worker{n}.log").read_text()
        assert "Task execute_plan" in log, log[-2000:]
        assert "succeeded" in log
    expected = index_snapshot(ingest_all_in_process.database_url)
    assert index_snapshot(url) == expected
    reference = vectors(ingest_all_in_process.database_url)
    got = vectors(url)
    assert got.keys() == reference.keys()
    for chunk_id, vector in got.items():
        assert all(
            math.isclose(a, b, abs_tol=1e-5)
            for a, b in zip(vector, reference[chunk_id], strict=True)
        )
