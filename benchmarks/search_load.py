"""Concurrent search in one process: latency (p50/p95), throughput and errors per thread count
and pool size (issue 38: 64 threads queued behind a pool of 8 had a p95 of 12.1 s).

    RAG_HOME=DIR python benchmarks/search_load.py [--threads 8,64] [--pool-sizes 8,16,64]
        [--queries 320] [--ingest]

Runs against the index of RAG_HOME (or RAG_VECTORDB_URL); `--ingest` first runs
`rag ingest --source all` there when it holds nothing (the bundled demo sources). Every
configuration shares one Searcher between its threads, as a server process would; the
query-vector cache is off, so every query embeds its text like a stream of distinct
questions. The queries are benchmarks/retrieval_queries.jsonl's, taken in turn. Each thread
count runs the same total number of queries; the first query of a configuration (opening
the pool) is not timed.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from rag_pipeline.search.engine import Searcher  # noqa: E402
from rag_pipeline.settings import load_settings  # noqa: E402
from rag_pipeline.store.pool import close_pools  # noqa: E402


@dataclass(frozen=True)
class Figures:
    """One configuration's measurement."""

    threads: int
    pool_size: int
    queries: int
    errors: int
    p50_ms: float
    p95_ms: float
    max_ms: float
    per_second: float
    first_error: str


def _queries() -> list[str]:
    lines = (HERE / "retrieval_queries.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines if line.strip()]


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def measure(threads: int, pool_size: int, total: int, queries: list[str]) -> Figures:
    """Run `total` searches from `threads` threads sharing one Searcher with a pool of
    `pool_size` connections."""
    settings = load_settings(search_pool_size=pool_size, search_query_cache_size=0)
    searcher = Searcher(settings)
    searcher.search(queries[0], top_k=5)  # opens the pool, checks the statistics
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    per_thread = max(1, total // threads)
    start = threading.Barrier(threads + 1)

    def client(offset: int) -> None:
        start.wait()
        for n in range(per_thread):
            query = queries[(offset * per_thread + n) % len(queries)]
            began = time.perf_counter()
            try:
                searcher.search(query, top_k=5)
            except Exception as exc:  # counted and shown, the run goes on
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                continue
            with lock:
                latencies.append(time.perf_counter() - began)

    workers = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    began = time.perf_counter()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - began
    close_pools()
    done = latencies or [float("nan")]
    return Figures(
        threads=threads,
        pool_size=pool_size,
        queries=len(latencies) + len(errors),
        errors=len(errors),
        p50_ms=statistics.median(done) * 1000,
        p95_ms=_percentile(done, 0.95) * 1000,
        max_ms=max(done) * 1000,
        per_second=len(latencies) / elapsed,
        first_error=errors[0][:120] if errors else "",
    )


def _ingest_if_empty() -> None:
    from rag_pipeline.mcp.tools import KnowledgeTools

    if KnowledgeTools(load_settings()).get_knowledge_stats().total_chunks:
        return
    print("ingesting the demo sources (rag ingest --source all) ...", flush=True)
    subprocess.run(
        [sys.executable, "-m", "rag_pipeline.cli", "ingest", "--source", "all"],
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def main() -> None:
    """Print the figures of every thread count and pool size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="8,64", help="Comma-separated thread counts.")
    parser.add_argument("--pool-sizes", default="8,16,64", help="Comma-separated pool sizes.")
    parser.add_argument("--queries", type=int, default=320, help="Searches per configuration.")
    parser.add_argument("--ingest", action="store_true", help="Ingest the demo sources first.")
    args = parser.parse_args()
    if args.ingest:
        _ingest_if_empty()
    from rag_pipeline.mcp.tools import KnowledgeTools

    stats = KnowledgeTools(load_settings()).get_knowledge_stats()
    print(
        f"index: {stats.total_documents:,} documents, {stats.total_chunks:,} chunks; "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start; "
        f"{args.queries} searches per row (top 5, hybrid)"
    )
    queries = _queries()
    print(
        f"{'threads':>7} {'pool':>5} {'queries':>7} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'max ms':>8} {'q/s':>6}"
    )
    for threads in (int(t) for t in args.threads.split(",")):
        for pool_size in (int(p) for p in args.pool_sizes.split(",")):
            f = measure(threads, pool_size, args.queries, queries)
            print(
                f"{f.threads:>7} {f.pool_size:>5} {f.queries:>7} {f.errors:>6} {f.p50_ms:>8.1f} "
                f"{f.p95_ms:>8.1f} {f.max_ms:>8.1f} {f.per_second:>6.1f}",
                flush=True,
            )
            if f.first_error:
                print(f"        first error: {f.first_error}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
