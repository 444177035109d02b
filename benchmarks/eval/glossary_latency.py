"""What carrying words across languages by the dictionary's glossary adds to a query's time.

    export RAG_HOME=/tmp/eval RAG_LANGUAGES=en_US,es_CO RAG_SEARCH_QUERY_CACHE_SIZE=0
    python -m benchmarks.eval.glossary_latency [--sample N]

Every question of the labelled sets that are not held out, searched in hybrid mode with the
glossary on and off in turn (which goes first alternates), in one process: the machine's load
weighs on both alike (`--sample N`: N questions evenly spread over them). Prints p50/p95 ms of
each and how many questions the glossary carried words for.
"""

import argparse
import statistics
import time
from dataclasses import replace

from benchmarks.eval.results import BLIND, HELD_OUT, HERE


def questions() -> list[str]:
    """The questions of the first set and every blind set that is not held out."""
    from rag_pipeline.evaluation.metrics import load_queries

    paths = [HERE / "queries.jsonl"]
    paths += [HERE / f"{name}_set" / "queries.jsonl" for name in BLIND if name not in HELD_OUT]
    return [query.text for path in paths for query in load_queries(path)]


def main() -> None:
    """Time every question both ways and print the figures."""
    from rag_pipeline.search.engine import Searcher

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sample", type=int, help="this many questions, evenly spread")
    args = parser.parse_args()
    texts = questions()
    if args.sample:
        texts = texts[:: max(1, len(texts) // args.sample)][: args.sample]

    searcher = Searcher()
    searcher.search("warm up the model and the pool", top_k=10)
    on = searcher.ranking
    off = replace(on, glossary_words=0)
    times: dict[bool, list[float]] = {True: [], False: []}
    carried = 0
    for number, text in enumerate(texts):
        for glossary in (True, False) if number % 2 else (False, True):
            searcher.ranking = searcher.understanding.ranking = on if glossary else off
            started = time.perf_counter()
            searcher.search(text, top_k=10, mode="hybrid")
            times[glossary].append((time.perf_counter() - started) * 1000)
        searcher.ranking = searcher.understanding.ranking = on
        carried += bool(searcher.understand(text, "keyword").added.carried)
    for glossary, found in times.items():
        p50, p95 = statistics.median(found), statistics.quantiles(found, n=20)[-1]
        print(f"glossary {'on ' if glossary else 'off'}: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    print(f"{len(times[True])} questions, {carried} with words carried over")


if __name__ == "__main__":
    main()
