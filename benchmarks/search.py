"""Search speed at 100k chunks: latency per mode from 1 and 8 clients, HNSW recall, index cost.

    python benchmarks/search.py [--chunks 100000] [--home DIR] [--shared ../shared]

1. Real texts: the labelled set's corpus (wiki pages, dictionary windows and processes in
   English and Spanish) chunked and embedded with the bundled model.
2. 100k chunks written straight into rag.documents / rag.sections / rag.chunks with COPY: each
   a real chunk's text mixed with a sentence of another one and a few varied words and
   identifiers; its vector the real one perturbed towards the other text plus noise, so the
   vectors spread like a real corpus's instead of repeating. Ten chunks per document, two per
   section. The HNSW index is built after the load and timed.
   With the multilingual second vector on (RAG_MULTILINGUAL_MODEL, the default), each chunk
   gets that model's vector too, made the same way from the real texts' vectors.
3. 500 queries (the labelled questions, dictionary names, identifiers, sentence fragments) run
   through `Searcher.search` in each mode, first from one client, then from 8 threads sharing
   one Searcher; the query-vector cache is off, so every vector/hybrid query embeds its text.
   Then hybrid again with the second vector off (RAG_MULTILINGUAL_MODEL=none) and on, in turn
   query by query: all queries, and the non-English ones alone (those the second vector
   serves), one client.
4. HNSW recall@10 against exact search for 200 query vectors, index sizes, how often the
   keyword leg's scan budget changes its top 10 against scoring every match, and the wall
   time of a cold `rag search` process.
5. Bounded inputs: hybrid latency of 2,000-character queries (real words; made-up words; one
   1,990-letter word) and how soon a 100,000-character one is refused. `--bounds-only` with
   `--database URL` (any indexed database, e.g. an ingested RAG_HOME's) runs only this.
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import psycopg

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from benchmarks.eval.build_corpus import build  # noqa: E402
from benchmarks.eval.measure import corpus_docs  # noqa: E402
from rag_pipeline_tests.search_support import (  # noqa: E402
    ChunkRow,
    Doc,
    ensure_vector_column,
    split,
    write_rows,
)

MODES = ("vector", "keyword", "hybrid")
_WORDS = [
    "order",
    "invoice",
    "payment",
    "locator",
    "warehouse",
    "partner",
    "product",
    "price",
    "tax",
    "period",
    "account",
    "shipment",
    "receipt",
    "inventory",
    "report",
    "process",
    "window",
    "field",
    "column",
    "tab",
    "role",
    "client",
    "org",
    "factura",
    "pedido",
    "almacén",
    "tercero",
    "producto",
    "precio",
    "impuesto",
    "periodo",
    "cuenta",
]
_IDENTIFIERS = [
    "C_BPartner_ID",
    "M_Locator_ID",
    "AD_Window_ID",
    "C_Order_ID",
    "M_Product_ID",
    "C_Invoice_ID",
    "AD_Process_ID",
    "DocStatus",
    "DocAction",
    "M_Warehouse_ID",
    "C_Period_ID",
    "AD_Org_ID",
]


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) of values."""
    return float(np.percentile(np.asarray(values), q))


def synthesize(
    base_chunks: list[ChunkRow],
    base_vectors: np.ndarray,
    total: int,
    rng: random.Random,
    base_second: np.ndarray | None = None,
) -> tuple[
    list[tuple[str, Doc]],
    list[tuple[str, str, int, str, list[str], str, int, int]],
    list[ChunkRow],
    np.ndarray,
    np.ndarray | None,
]:
    """`total` varied chunks from the real ones, grouped in documents of ten (and their second
    vectors from `base_second`, mixed alike)."""
    nprng = np.random.default_rng(rng.randrange(1 << 30))
    documents: list[tuple[str, Doc]] = []
    sections: list[tuple[str, str, int, str, list[str], str, int, int]] = []
    chunks: list[ChunkRow] = []
    vectors = np.empty((total, base_vectors.shape[1]), dtype=np.float32)
    second = None if base_second is None else np.empty((total, base_second.shape[1]), np.float32)
    sentences = [s.strip() for c in base_chunks for s in c.text.split(". ") if len(s) > 30]
    for i in range(total):
        if i % 10 == 0:
            doc_id = f"bench-doc-{i // 10:06d}"
            anchor = base_chunks[rng.randrange(len(base_chunks))]
            title = f"{anchor.heading.split(' › ')[0]} ({i // 10})"
            language = anchor.language
            documents.append(
                (
                    doc_id,
                    Doc(
                        "bench",
                        f"bench/{i // 10:06d}.md",
                        title,
                        "",
                        language=language,
                        breadcrumb=f"Bench / Part {i // 1000}",
                    ),
                )
            )
        if i % 2 == 0:
            section_id = f"bench-sec-{i // 2:06d}"
            sections.append((section_id, doc_id, (i % 10) // 2, title, [title], "", 0, 0))
        a = rng.randrange(len(base_chunks))
        b = rng.randrange(len(base_chunks))
        base = base_chunks[a]
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 8)))
        extra = rng.choice(sentences)
        ident = rng.choice(_IDENTIFIERS) if rng.random() < 0.3 else ""
        text = f"{base.text}\n\n{extra}. {words} {ident} {i}".strip()
        mix = rng.uniform(0.1, 0.5)
        vector = base_vectors[a] + mix * base_vectors[b]
        vector += nprng.normal(0, 0.02, size=vector.shape).astype(np.float32)
        vectors[i] = vector / np.linalg.norm(vector)
        if second is not None and base_second is not None:
            other = base_second[a] + mix * base_second[b]
            other += nprng.normal(0, 0.02, size=other.shape).astype(np.float32)
            second[i] = other / np.linalg.norm(other)
        chunks.append(
            ChunkRow(
                id=f"bench-chunk-{i:07d}",
                document_id=doc_id,
                section_id=section_id,
                source_type="bench",
                language=language,
                ordinal=i % 10,
                heading=f"{title} › {base.heading}",
                text=text,
                embedded_text=text,
                token_count=min(256, base.token_count + 20),
                start_char=0,
                end_char=len(text),
            )
        )
    return documents, sections, chunks, vectors, second


def make_queries(
    base_docs: list[Doc], base_chunks: list[ChunkRow], rng: random.Random, count: int
) -> list[str]:
    """Labelled questions, then names, identifiers and fragments, up to `count`."""
    import json

    labelled = [
        json.loads(line)["text"]
        for line in (HERE / "eval" / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    queries = list(labelled)
    while len(queries) < count:
        kind = rng.random()
        if kind < 0.35:
            queries.append(rng.choice(base_docs).title)
        elif kind < 0.5:
            queries.append(f"{rng.choice(_IDENTIFIERS)} {rng.choice(_WORDS)}")
        else:
            words = rng.choice(base_chunks).text.split()
            start = rng.randrange(max(1, len(words) - 8))
            queries.append(" ".join(words[start : start + rng.randint(3, 9)]))
    return queries[:count]


def run_clients(searcher: object, queries: list[str], mode: str, clients: int) -> dict[str, float]:
    """Latencies and throughput of `queries` spread over `clients` threads."""
    latencies: list[float] = []
    lock = threading.Lock()

    def one(query: str) -> None:
        started = time.perf_counter()
        searcher.search(query, top_k=10, mode=mode)  # type: ignore[attr-defined]
        elapsed = time.perf_counter() - started
        with lock:
            latencies.append(elapsed)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(one, queries))
    wall = time.perf_counter() - started
    ms = [1000 * x for x in latencies]
    return {
        "p50": percentile(ms, 50),
        "p95": percentile(ms, 95),
        "p99": percentile(ms, 99),
        "qps": len(queries) / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--home", type=Path, default=Path(tempfile.gettempdir()) / "rag_bench")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--database", help="measure an index this script built before (URL)")
    parser.add_argument("--bounds-only", action="store_true", help="only step 5 (--database)")
    args = parser.parse_args()
    rng = random.Random(11)

    from rag_pipeline.settings import load_settings
    from rag_pipeline.store.runtime import load_embedder

    settings = load_settings(home=args.home, search_query_cache_size=0, search_pool_size=8)
    embedder = load_embedder(settings)
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp), args.shared)
        base_docs = corpus_docs(Path(tmp))
    _, _, base_chunks = split(base_docs, embedder.count_tokens)
    if args.bounds_only and args.database:
        from rag_pipeline.search.engine import Searcher

        bounded_inputs(Searcher(settings, embedder=embedder, conninfo=args.database), rng)
        return
    url = args.database or load_index(args, settings, embedder, base_chunks, rng)
    measure(url, args, settings, embedder, base_docs, base_chunks, rng)
    from rag_pipeline.search.engine import Searcher

    bounded_inputs(Searcher(settings, embedder=embedder, conninfo=url), rng)


def bounded_inputs(searcher, rng: random.Random) -> None:  # type: ignore[no-untyped-def]
    """Hybrid latency of 2,000-character queries (best and median of 5, vector cache off)
    and the time to refuse a 100,000-character one."""
    vocabulary = [
        "warehouse",
        "locator",
        "inventory",
        "movement",
        "product",
        "price",
        "list",
        "business",
        "partner",
        "invoice",
        "payment",
        "shipment",
        "receipt",
        "tax",
        "rate",
        "currency",
        "conversion",
        "account",
        "schema",
        "period",
        "calendar",
    ]
    letters = "abcdefghijklmnopqrstuvwxyz"
    made_up = " ".join(
        "".join(rng.choice(letters) for _ in range(rng.randint(5, 20))) for _ in range(300)
    )
    cases = {
        # The machine's pace at the time: the long ones read against it.
        "reference: a 7-word question": "how do I create a new price list",
        "2,000 chars of real words": " ".join(rng.choice(vocabulary) for _ in range(400))[:2000],
        "2,000 chars of made-up words": made_up[:2000],
        "one 1,990-letter word": "x" * 1990 + " locator",
    }
    searcher.search("warm up the model", mode="hybrid")
    print()
    for name, text in cases.items():
        times = []
        for _ in range(5):
            started = time.perf_counter()
            searcher.search(text, mode="hybrid")
            times.append((time.perf_counter() - started) * 1000)
        print(f"{name:<30} best {min(times):7.1f} ms, median {sorted(times)[2]:7.1f} ms")
    started = time.perf_counter()
    try:
        searcher.search("y" * 100_000)
    except ValueError as exc:
        refused = (time.perf_counter() - started) * 1000
        print(f"100,000 chars refused in {refused:.3f} ms: {exc}")


def load_index(args, settings, embedder, base_chunks, rng) -> str:  # type: ignore[no-untyped-def]
    """Create a database with `args.chunks` synthetic chunks; return its URL."""
    from rag_pipeline.store.migrations import ensure_second_model
    from rag_pipeline.store.runtime import load_second_embedder
    from rag_pipeline.store.server import resolve_conninfo

    admin = resolve_conninfo(settings)
    name = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = admin.replace("/rag?", f"/{name}?")
    print(f"database: {url}")
    started = time.perf_counter()
    base_vectors = embedder.embed_passages([c.embedded_text for c in base_chunks])
    print(
        f"real texts: {len(base_chunks)} chunks embedded in {time.perf_counter() - started:.0f} s"
    )
    second_model = load_second_embedder(settings)
    base_second = None
    if second_model is not None:
        started = time.perf_counter()
        base_second = second_model.embed_passages([c.embedded_text for c in base_chunks])
        print(f"  and by {second_model.model_id} in {time.perf_counter() - started:.0f} s")

    documents, sections, chunks, vectors, second = synthesize(
        base_chunks, base_vectors, args.chunks, rng, base_second
    )
    with psycopg.connect(url) as conn:
        ensure_vector_column(conn, embedder.model_id, embedder.dimension)
        # Loading into an HNSW-indexed table inserts row by row into the graph; build it after.
        conn.execute("DROP INDEX rag.chunks_embedding_hnsw")
        if second_model is not None:
            ensure_second_model(conn, second_model.model_id, second_model.dimension)
            conn.execute("DROP INDEX rag.chunks_embedding_ml_hnsw")
        conn.commit()
        started = time.perf_counter()
        step = 10_000
        for lo in range(0, len(chunks), step):
            doc_lo, doc_hi = lo // 10, (lo + step) // 10
            sec_lo, sec_hi = lo // 2, (lo + step) // 2
            write_rows(
                conn,
                documents[doc_lo:doc_hi],
                sections[sec_lo:sec_hi],
                chunks[lo : lo + step],
                vectors[lo : lo + step],
                None if second is None else second[lo : lo + step],
            )
        load_seconds = time.perf_counter() - started
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET max_parallel_maintenance_workers = 2")
        started = time.perf_counter()
        conn.execute(
            "CREATE INDEX chunks_embedding_hnsw ON rag.chunks"
            " USING hnsw (embedding vector_cosine_ops)"
        )
        conn.commit()
        hnsw_seconds = time.perf_counter() - started
        if second_model is not None:
            started = time.perf_counter()
            conn.execute(
                "CREATE INDEX chunks_embedding_ml_hnsw ON rag.chunks"
                " USING hnsw (embedding_ml vector_cosine_ops)"
            )
            conn.commit()
            print(f"second vectors' HNSW index built in {time.perf_counter() - started:.0f} s")
        started = time.perf_counter()
        conn.execute("SELECT rag.refresh_term_stats()")
        conn.commit()
        stats_seconds = time.perf_counter() - started
        sizes = conn.execute(
            "SELECT pg_size_pretty(pg_relation_size('rag.chunks_embedding_hnsw')),"
            " pg_size_pretty(pg_relation_size('rag.chunks_tsv_idx')),"
            " pg_size_pretty(pg_relation_size('rag.chunks_ident_tsv_idx')),"
            " pg_size_pretty(pg_total_relation_size('rag.chunks')),"
            " (SELECT count(*) FROM rag.chunks)"
        ).fetchone()
    assert sizes is not None
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE rag.chunks")
    print(
        f"loaded {sizes[4]:,} chunks with COPY in {load_seconds:.0f} s; HNSW index built in "
        f"{hnsw_seconds:.0f} s ({sizes[0]}); BM25 statistics in {stats_seconds:.1f} s"
    )
    print(f"sizes: tsv GIN {sizes[1]}, identifier GIN {sizes[2]}, rag.chunks total {sizes[3]}")
    return url


def measure(url, args, settings, embedder, base_docs, base_chunks, rng) -> None:  # type: ignore[no-untyped-def]
    """Latencies per mode, HNSW recall and a cold process, on the index at `url`."""
    from rag_pipeline.search.engine import Searcher
    from rag_pipeline.store.runtime import load_second_embedder

    queries = make_queries(base_docs, base_chunks, rng, args.queries)
    searcher = Searcher(settings, embedder=embedder, conninfo=url)
    # Warm the pool, the caches and the models (a Spanish query loads the second one).
    for query in [*queries[:20], "órdenes de venta"]:
        searcher.search(query, mode="hybrid")
    print()
    print(f"{'mode':<9}{'clients':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'queries/s':>11}")
    for mode in MODES:
        for clients in (1, 8):
            figures = run_clients(searcher, queries, mode, clients)
            print(
                f"{mode:<9}{clients:>8}{figures['p50']:>9.1f}{figures['p95']:>9.1f}"
                f"{figures['p99']:>9.1f}{figures['qps']:>11.1f}"
            )

    second_vector_cost(url, settings, embedder, queries)
    vectors = [embedder.embed_query(q) for q in queries[:200]]
    recall = hnsw_recall(url, vectors, settings.search_ef_search)
    print(
        f"\nHNSW recall@10 against exact search (ef_search {settings.search_ef_search}): "
        f"{recall:.3f}"
    )
    second = load_second_embedder(settings)
    if second is not None:
        vectors = [second.embed_query(q) for q in queries[:200]]
        recall = hnsw_recall(url, vectors, settings.search_ef_search, "embedding_ml")
        print(f"HNSW recall@10 of the second vectors ({second.model_id}): {recall:.3f}")
    keyword_agreement(url, settings, embedder, queries[:300])
    cold = cold_process(url, args.home)
    print(f"cold `rag search` process: {' / '.join(f'{s:.2f}' for s in cold)} s (3 runs)")


def second_vector_cost(url: str, settings, embedder, queries: list[str]) -> None:  # type: ignore[no-untyped-def]
    """Hybrid latency with the second vector off and on, query by query in turn (each first
    every other time), one client."""
    from rag_pipeline.search.engine import Searcher

    if settings.second_vector_model is None:
        return
    off = Searcher(
        settings.model_copy(update={"multilingual_model": "none"}), embedder=embedder, conninfo=url
    )
    on = Searcher(settings, embedder=embedder, conninfo=url)
    other = [q for q in queries if on.understand(q, "hybrid").vector_column == "embedding_ml"]
    for searcher in (off, on):  # warm both, the second model loaded before any timing
        for query in queries[:20] + other[:5]:
            searcher.search(query, mode="hybrid")
    print()
    for name, chosen in (("all", queries), ("non-English", other)):
        times: dict[str, list[float]] = {"off": [], "on": []}
        for n, query in enumerate(chosen):
            # Alternate which goes first: the second reads pages the first brought to memory.
            pair = (("off", off), ("on", on)) if n % 2 == 0 else (("on", on), ("off", off))
            for label, searcher in pair:
                started = time.perf_counter()
                searcher.search(query, top_k=10, mode="hybrid")
                times[label].append(1000 * (time.perf_counter() - started))
        print(
            f"hybrid, {name} queries ({len(chosen)}), second vector off / on: "
            f"p50 {percentile(times['off'], 50):.1f} / {percentile(times['on'], 50):.1f} ms, "
            f"p95 {percentile(times['off'], 95):.1f} / {percentile(times['on'], 95):.1f} ms"
        )


def keyword_agreement(url: str, settings, embedder, queries: list[str]) -> None:  # type: ignore[no-untyped-def]
    """How far the keyword leg's scan budget changes its top 10 against scoring every match."""
    from rag_pipeline.search.engine import Searcher

    def top10(scan: int) -> list[list[str]]:
        searcher = Searcher(settings, embedder=embedder, conninfo=url, keyword_scan=scan)
        return [
            [h.section_id for h in searcher.search(q, mode="keyword", top_k=10)] for q in queries
        ]

    every = top10(10_000_000)
    default = Searcher(settings, embedder=embedder, conninfo=url).keyword_scan
    for scan in (default, 2 * default):
        budget = top10(scan)
        overlap = [
            len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(budget, every, strict=True)
        ]
        first = [a[:1] == b[:1] for a, b in zip(budget, every, strict=True)]
        print(
            f"keyword leg, {scan:,} chunks scored: top 10 shared with scoring every match "
            f"{sum(overlap) / len(overlap):.3f}, same first hit {sum(first) / len(first):.3f}"
        )


def hnsw_recall(
    url: str, vectors: list[np.ndarray], ef_search: int, column: str = "embedding"
) -> float:
    """Mean share of the exact top 10 chunks the HNSW scan of `column` returns."""
    from pgvector.psycopg import register_vector

    found = 0
    statement = f"SELECT id FROM rag.chunks ORDER BY {column} <=> %s LIMIT 10"
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute(f"SET hnsw.ef_search = {int(ef_search)}")
        for vector in vectors:
            conn.execute("SET enable_indexscan = on")
            approx = {r[0] for r in conn.execute(statement, (vector,)).fetchall()}
            conn.execute("SET enable_indexscan = off")  # a sequential scan: exact distances
            exact = {r[0] for r in conn.execute(statement, (vector,)).fetchall()}
            found += len(approx & exact)
    return found / (10 * len(vectors))


def cold_process(url: str, home: Path) -> list[float]:
    """Wall seconds of three fresh `rag search ... --json` processes."""
    env = dict(os.environ, RAG_HOME=str(home), RAG_VECTORDB_URL=url)
    rag = Path(sys.executable).with_name("rag")
    times: list[float] = []
    for query in ("how do I create a locator", "C_BPartner_ID", "órdenes de venta"):
        started = time.perf_counter()
        subprocess.run(
            [str(rag), "search", query, "--json"], env=env, check=True, capture_output=True
        )
        times.append(time.perf_counter() - started)
    return times


if __name__ == "__main__":
    main()
