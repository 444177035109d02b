"""Wall and CPU time of fresh `rag search ... --json` processes, two code trees alternately.

    export RAG_HOME=$(mktemp -d); rag ingest --source files      # any ingested index
    git worktree add /tmp/before <commit>                          # or `git archive | tar -x`
    python -m benchmarks.cold_search /tmp/before . [--runs 3] [--bytecode]

Each tree is put first on PYTHONPATH of its own processes, so the `rag` of this venv runs that
tree's code. The three queries of `cold_process` in benchmarks/search.py are each run `--runs`
times per tree, the trees taking turns, after one uncounted run per tree (page cache, the
search vocabulary's cache under RAG_HOME). It prints every wall time, the median, least and
most, the median CPU (user + sys of the child, ONNX Runtime's threads included), the load
average before and after, and whether both trees printed the same hits. `--bytecode` lets
Python write and read bytecode (in a folder of its own per tree, outside the trees), as a
`pip install` leaves it; without it the environment decides (PYTHONDONTWRITEBYTECODE=1 makes
every run compile the package's modules from source).
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUERIES = ("how do I create a locator", "C_BPartner_ID", "órdenes de venta")


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("trees", nargs="+", type=Path, help="folders holding rag_pipeline/")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bytecode", action="store_true")
    args = parser.parse_args()
    rag = Path(sys.executable).with_name("rag")
    bytecode = Path(tempfile.mkdtemp(prefix="cold-search-pyc-"))

    def run(tree: Path, query: str) -> tuple[float, float, bytes]:
        env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
        if args.bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(bytecode / str(args.trees.index(tree)))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(
            [str(rag), "search", query, "--json"], env=env, check=True, capture_output=True
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        return wall, cpu, done.stdout

    for tree in args.trees:
        run(tree, "warm up")
    walls = {(tree, q): list[float]() for tree in args.trees for q in QUERIES}
    cpus = {tree: list[float]() for tree in args.trees}
    hits: dict[tuple[Path, str], bytes] = {}
    loads = [_load()]
    for _ in range(args.runs):
        for query in QUERIES:
            for tree in args.trees:
                wall, cpu, hits[tree, query] = run(tree, query)
                walls[tree, query].append(wall)
                cpus[tree].append(cpu)
    loads.append(_load())
    print(f"load average {loads[0]} -> {loads[1]}; {args.runs} runs of each query per tree")
    for tree in args.trees:
        every = [w for q in QUERIES for w in walls[tree, q]]
        for query in QUERIES:
            print(f"{tree}  {query!r}: " + " / ".join(f"{w:.2f}" for w in walls[tree, query]))
        print(
            f"{tree}  wall median {statistics.median(every):.2f} s (least {min(every):.2f},"
            f" most {max(every):.2f}); CPU median {statistics.median(cpus[tree]):.2f} s"
        )
    for query in QUERIES:
        same = len({hits[tree, query] for tree in args.trees}) == 1
        print(f"{query!r}: {'the same hits' if same else 'DIFFERENT hits'} from every tree")


if __name__ == "__main__":
    main()
