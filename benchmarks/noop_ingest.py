"""A no-op `rag ingest --source all` on the bundled demo data.

    python benchmarks/noop_ingest.py [--repeat N] [--force]

On a fresh RAG_HOME (embedded PostgreSQL, its own Dagster instance): a first
`rag ingest --source all`, then the same command again with nothing changed, each its own
process, and prints the seconds of each, the partitions the second one ran and the load
average (`--repeat N`: N no-op ingests, one line each). Target (issue 47): the no-op one in at
most 15 s on a quiet machine. With `--force`
it also times `rag ingest --source all --force`, which runs every partition.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.ingest import _stop_server, embedded_home  # noqa: E402


def _ingest(*extra: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "rag_pipeline.cli", "ingest", "--source", "all", *extra],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if done.returncode:
        sys.exit(f"rag ingest {' '.join(extra)} failed:\n{done.stdout}{done.stderr}")
    return time.perf_counter() - started, done.stdout


def main() -> None:
    """Time a first and a no-op `rag ingest --source all` on a fresh home."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--force", action="store_true", help="also time a forced ingest")
    parser.add_argument("--repeat", type=int, default=1, help="no-op ingests to time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = embedded_home(Path(tmp))
        os.environ.pop("DAGSTER_HOME", None)
        try:
            first, _ = _ingest()
            print(f"first ingest: {first:.1f} s, load {os.getloadavg()[0]:.1f}", flush=True)
            for _ in range(args.repeat):
                again, output = _ingest()
                skipped = output.count(", no run")
                ran = output.count(" new, ")
                print(
                    f"no-op ingest: {again:.1f} s, {ran} partitions run, {skipped} observed "
                    f"without a run, load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
            if args.force:
                forced, output = _ingest("--force")
                print(
                    f"forced ingest: {forced:.1f} s, {output.count(' new, ')} partitions run, "
                    f"load {os.getloadavg()[0]:.1f}"
                )
        finally:
            _stop_server(home)


if __name__ == "__main__":
    main()
