"""Hybrid search with its two legs at once, against the one statement it runs now.

    export RAG_HOME=/tmp/eval RAG_LANGUAGES=en_US,es_CO     # an ingested index
    python -m benchmarks.parallel_legs [--queries 200] [--rounds 2] [--clients 8]

The engine runs hybrid search as one statement: the vector leg, then the keyword leg, then
fusion and the section collapse (`search/queries.py`); PostgreSQL runs a statement's parts one
after the other, so its latency is about vector + keyword. Here the same parts run as three
statements: the vector leg on one pooled connection while the keyword leg runs on another,
then fusion, collapse and lineage on the keyword leg's connection with both legs' rows as
arrays. Each labelled question is searched both ways, alternately, from one client; the
script checks both give the same hits (ids and scores) and prints p50/p95 of each way with the
load average. `--clients N` then searches the questions from N threads sharing one Searcher,
each way in turn, and prints the queries per second. Nothing here changes the engine: it
measures whether the change would pay.
"""

import argparse
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, LiteralString, cast

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from benchmarks.eval.top10_snapshot import question_files
from rag_pipeline.evaluation.metrics import load_queries
from rag_pipeline.search import Searcher, SearchHit
from rag_pipeline.search.collapse import LINEAGE, SECTION_COLLAPSE
from rag_pipeline.search.hits import hit_from_row
from rag_pipeline.search.queries import (
    _TYPED_FORM,  # pyright: ignore[reportPrivateUsage]
    FUSION,
    FUSION_SCORES,
    KEYWORD_RANKS,
    TITLE_RULES,
    keyword_leg,
    vector_leg,
)

_LEGS_VEC = """
vec_raw AS (
    SELECT * FROM unnest(%(v_ids)s::text[], %(v_sections)s::text[], %(v_distances)s::float8[])
        AS x (id, section_id, distance)
),
vec AS ("""
_LEGS_KW = """
kw AS (
    SELECT * FROM unnest(%(k_sections)s::text[], %(k_chunks)s::text[], %(k_scores)s::float8[],
                         %(k_ranks)s::bigint[]) AS x (section_id, chunk_id, score, rank)
)"""


def _statement(text: str) -> sql.SQL:
    return sql.SQL(cast(LiteralString, text))


def statements(exact_vectors: bool) -> tuple[sql.SQL, sql.SQL, sql.SQL]:
    """The vector leg, the keyword leg, and fusion + collapse + lineage over both legs' rows."""
    vector = vector_leg(exact=exact_vectors)
    raw, _, ranked = vector.partition("),\nvec AS (")
    keyword = ",".join(
        [
            keyword_leg("bm25"),
            TITLE_RULES.format(
                typed_query=_TYPED_FORM.format("%(query_text)s::text"),
                typed_document_title=_TYPED_FORM.format("d.title"),
                typed_section_title=_TYPED_FORM.format("s.title"),
            ),
            KEYWORD_RANKS,
        ]
    )
    fusion = ",".join(
        [
            _LEGS_VEC + ranked,
            _LEGS_KW,
            FUSION.format(fusion=FUSION_SCORES["tmm"]),
            SECTION_COLLAPSE.format(vector_candidates_read="(SELECT count(*) FROM vec_raw)"),
        ]
    )
    return (
        _statement("WITH" + raw + ")\nSELECT id, section_id, distance FROM vec_raw"),
        _statement("WITH" + keyword + "\nSELECT section_id, chunk_id, score, rank FROM kw"),
        _statement("WITH" + fusion + LINEAGE),
    )


def parallel_search(
    searcher: Searcher, text: str, workers: ThreadPoolExecutor, top_k: int = 10
) -> list[SearchHit]:
    """`text` searched in hybrid mode with the legs on two connections at once."""
    request = searcher.request(top_k, None, None, None, None, "parent", None)
    prepared = searcher.understand(text, "hybrid")
    params = searcher.parameters(prepared, request)
    vector_sql, keyword_sql, fusion_sql = statements(searcher._small_index)  # pyright: ignore[reportPrivateUsage]
    pool = searcher._pool  # pyright: ignore[reportPrivateUsage]

    def vector_leg(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
        return conn.execute(vector_sql, params).fetchall()

    def keyword_then_fusion(conn: psycopg.Connection) -> list[dict[str, Any]]:
        vectors = workers.submit(pool.run, vector_leg)
        keywords = conn.execute(keyword_sql, params).fetchall()
        v_rows = vectors.result()
        both = params | {
            "v_ids": [r[0] for r in v_rows],
            "v_sections": [r[1] for r in v_rows],
            "v_distances": [r[2] for r in v_rows],
            "k_sections": [r[0] for r in keywords],
            "k_chunks": [r[1] for r in keywords],
            "k_scores": [r[2] for r in keywords],
            "k_ranks": [r[3] for r in keywords],
        }
        with conn.cursor(row_factory=dict_row) as cursor:
            return cursor.execute(fusion_sql, both).fetchall()

    return [hit_from_row(row, False) for row in pool.run(keyword_then_fusion)]


def _percentiles(times: list[float]) -> str:
    p95 = statistics.quantiles(times, n=20)[-1]
    return f"p50 {statistics.median(times):.1f} ms, p95 {p95:.1f} ms"


def throughput(searcher: Searcher, texts: list[str], clients: int, parallel: bool) -> float:
    """Queries per second of `texts` searched from `clients` threads sharing `searcher`."""
    with ThreadPoolExecutor(max_workers=clients) as legs:

        def one(text: str) -> object:
            if parallel:
                return parallel_search(searcher, text, legs)
            return searcher.search(text, top_k=10, mode="hybrid")

        with ThreadPoolExecutor(max_workers=clients) as callers:
            started = time.perf_counter()
            list(callers.map(one, texts))
            return len(texts) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", type=int, default=0)
    args = parser.parse_args()
    texts = [q.text for path in question_files().values() for q in load_queries(path)]
    texts = texts[: args.queries]
    searcher = Searcher()
    serial_times: list[float] = []
    parallel_times: list[float] = []
    same = 0
    with ThreadPoolExecutor(max_workers=1) as workers:
        for text in texts[:5]:  # warm the pool's second connection, the model and the caches
            searcher.search(text, mode="hybrid")
            parallel_search(searcher, text, workers)
        print(f"load average before: {os.getloadavg()}")
        for _ in range(args.rounds):
            for text in texts:
                started = time.perf_counter()
                serial = searcher.search(text, top_k=10, mode="hybrid")
                serial_times.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                parallel = parallel_search(searcher, text, workers)
                parallel_times.append((time.perf_counter() - started) * 1000)
                same += [(h.chunk_id, h.score) for h in serial] == [
                    (h.chunk_id, h.score) for h in parallel
                ]
    print(f"load average after: {os.getloadavg()}")
    print(f"{len(serial_times)} searches each way; identical hits: {same}")
    print(f"one statement:       {_percentiles(serial_times)}")
    print(f"legs at once:        {_percentiles(parallel_times)}")
    if args.clients:
        for parallel in (False, True, False, True):
            rate = throughput(searcher, texts, args.clients, parallel)
            way = "legs at once" if parallel else "one statement"
            print(f"{args.clients} clients, {way}: {rate:.1f} queries/s, load {os.getloadavg()}")


if __name__ == "__main__":
    main()
