"""Issue 14, processes: pool workers do not outlive a parent killed with SIGKILL."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil

from rag_pipeline.core.workers import worker_pool

_PARENT = textwrap.dedent(
    """
    import sys, time
    from rag_pipeline.core.workers import worker_pool

    pool = worker_pool(2)
    futures = [pool.submit(time.sleep, 600) for _ in range(2)]
    # Let both workers start and pick up their task before saying so.
    time.sleep(1)
    print("ready", flush=True)
    time.sleep(600)
    """
)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_until_gone(processes: list[psutil.Process], patience: float) -> list[psutil.Process]:
    # Poll with a generous deadline: the machine may be loaded; the point is "gone", not "fast".
    deadline = time.monotonic() + patience
    left = [p for p in processes if _alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [p for p in left if _alive(p)]
    return left


def test_workers_and_resource_tracker_die_with_a_killed_parent() -> None:
    descendants: list[psutil.Process] = []
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline().strip() == "ready"
        descendants = psutil.Process(parent.pid).children(recursive=True)
        # Two workers plus multiprocessing's resource tracker.
        assert len(descendants) >= 3
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        left = _wait_until_gone(descendants, patience=60)
        assert not left, [p.cmdline() for p in left]
    finally:
        parent.kill()
        for process in descendants:
            if _alive(process):
                process.kill()


def test_a_pool_still_works_normally() -> None:
    with worker_pool(2) as pool:
        assert sorted(pool.map(abs, [-3, -1, 2])) == [1, 2, 3]
