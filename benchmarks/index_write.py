"""Where a large first ingest spends its time outside the model: the index write, history, checks.

    python benchmarks/index_write.py [--docs 100000] [--shared ../shared] [--slow-ms 1000]

The full first ingest at 100,000 documents takes more than an hour, most of it the model's.
This benchmark takes the model out and keeps everything else real: on a fresh embedded
PostgreSQL under a temporary RAG_HOME it ingests the corpus of `benchmarks/ingest.py` up to its
chunks stage, puts a vector for every chunk text in the embedding cache (a seeded random unit
vector per text and model: the cache is the input the embeddings step reads, so the step then
embeds nothing), and runs the whole files ingest job. It prints:

- the job's wall and CPU seconds (the process and the PostgreSQL server), each step's own
  seconds, and the time outside them (the issue 48 target: at most 3 % of a first ingest);
- the IO manager's and the embeddings step's phases as their metadata reports them;
- every SQL statement that ran longer than `--slow-ms`, from the server's log, with its time;
- the peak RSS of this process during the job (the models are loaded; nothing is embedded)
  and the database size, with its largest tables.

The vectors are not the model's, so nothing here measures search quality; the rows, the
indexes (HNSW and GIN), the history and the checks are the same as a real ingest's.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rag_pipeline.settings import load_settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.ingest import STAGES, CpuClock, embedded_home, generate_corpus

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--slow-ms", type=int, default=1000, help="log statements over this")
    parser.add_argument(
        "--bulk-build",
        action="store_true",
        help="load without the HNSW indexes, then build them over the loaded rows "
        "(maintenance_work_mem 1 GB): what a bulk path pays instead of the inserts",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rag-index-write-") as tmp:
        home = embedded_home(Path(tmp))
        corpus = Path(tmp) / "corpus"
        documents = generate_corpus(args.shared, corpus, args.docs)
        print(f"corpus: {documents} documents")
        try:
            run(corpus, home, args.slow_ms, args.bulk_build)
        finally:
            from rag_pipeline.store.server import stop_embedded_server

            stop_embedded_server(load_settings())


def run(corpus: Path, home: Path, slow_ms: int, bulk_build: bool = False) -> None:
    import dagster as dg

    from rag_pipeline.definitions import defs
    from rag_pipeline.operations.folders import register_folder
    from rag_pipeline.orchestration.source_registry import FILES
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.runtime import ready_conninfo

    settings = load_settings()
    conninfo = ready_conninfo(settings)
    job = defs().resolve_job_def(FILES.ingest_job)
    key = register_folder(settings, corpus).name
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("files_folders", [key])
    quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
    chain = [dg.AssetKey(["files", stage]) for stage in ("raw", "markdown", "sanitized", "chunks")]

    started = time.perf_counter()
    result = job.execute_in_process(
        instance=instance, partition_key=key, run_config=quiet, asset_selection=chain
    )
    assert result.success
    print(f"raw → chunks: {time.perf_counter() - started:.1f} s")

    # In a child process: this one's memory then shows only what the job itself holds.
    started = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--fill-cache", conninfo], check=True)
    print(f"cache filled in {time.perf_counter() - started:.1f} s")

    with connect(conninfo, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET log_min_duration_statement = {int(slow_ms)}")
        conn.execute("ALTER SYSTEM SET log_parameter_max_length = 0")
        conn.execute("SELECT pg_reload_conf()")
    log = home / "postgres.log"
    log_start = log.stat().st_size if log.exists() else 0

    hnsw: dict[str, str] = {}
    if bulk_build:  # the rows load without the HNSW indexes; they are built after the job
        from rag_pipeline.store.migrations import ensure_model, ensure_second_model
        from rag_pipeline.store.runtime import load_embedder, load_second_embedder

        model, second = load_embedder(settings), load_second_embedder(settings)
        with connect(conninfo, autocommit=True) as conn:
            ensure_model(conn, model.model_id, model.dimension, force=False)
            if second is not None:
                ensure_second_model(conn, second.model_id, second.dimension)
        hnsw = _hnsw_definitions(conninfo)
        with connect(conninfo, autocommit=True) as conn:
            for name in hnsw:
                conn.execute(f"DROP INDEX rag.{name}")

    clock = CpuClock(home)
    started, cpu = time.perf_counter(), clock.now()
    result = job.execute_in_process(instance=instance, partition_key=key, run_config=quiet)
    elapsed, cpu = time.perf_counter() - started, clock.now() - cpu
    assert result.success
    own = 0.0
    print(f"first ingest of the embeddings stage and its checks: {elapsed:.1f} s ({cpu:.1f} CPU s)")
    for node in STAGES:
        (materialization,) = result.asset_materializations_for_node(node)
        meta = {k: v.value for k, v in materialization.metadata.items()}
        seconds = float(meta.get("seconds", 0) or 0)
        own += seconds
        print(f"  {node:<17} {seconds:8.2f} s")
        if node == "files__embeddings":
            for name, value in sorted(meta.items()):
                if "seconds" in name or name.startswith(("documents_", "chunks_")):
                    print(f"      {name}: {value}")
    print(f"outside the steps' own seconds: {elapsed - own:.1f} s")

    print(f"statements over {slow_ms} ms:")
    with open(log, encoding="utf-8", errors="replace") as text:
        text.seek(log_start)
        lines = iter(text)
        for line in lines:
            found = re.search(r"duration: ([\d.]+) ms\s+(?:statement|execute [^:]*): (.*)", line)
            if found:
                # A statement that starts with a line break shows its first line of text.
                first = found[2].strip() or next(lines, "").strip()
                print(f"  {float(found[1]) / 1000:8.1f} s  {first[:150]}")
    with connect(conninfo) as conn:
        size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        tables = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'rag' AND c.relkind = 'r' ORDER BY 2 DESC LIMIT 8"
        ).fetchall()
    print(f"database size: {int(size[0]) / 2**20:.0f} MiB" if size else "")
    for name, total in tables:
        print(f"  rag.{name}: {int(total) / 2**20:.0f} MiB")
    with open("/proc/self/status", encoding="ascii") as status:
        peak = next(line for line in status if line.startswith("VmHWM"))
    megabytes = int(peak.split()[1]) / 1024
    print(f"peak RSS of this process (the job; nothing embedded): {megabytes:.0f} MiB")
    if bulk_build:
        with connect(conninfo, autocommit=True) as conn:
            conn.execute("SET maintenance_work_mem = '1GB'")
            for name, definition in hnsw.items():
                started, cpu = time.perf_counter(), clock.now()
                conn.execute(definition)
                print(
                    f"bulk build of rag.{name}: {time.perf_counter() - started:.1f} s "
                    f"({clock.now() - cpu:.1f} CPU s, parallel workers included)"
                )


def _hnsw_definitions(conninfo: str) -> dict[str, str]:
    from rag_pipeline.store.connection import connect

    with connect(conninfo) as conn:
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'rag'"
            " AND indexdef LIKE '%USING hnsw%' ORDER BY 1"
        ).fetchall()
    return {str(name): str(definition) for name, definition in rows}


def fill_cache(conninfo: str) -> None:
    """Put a vector for every chunk text of the files source in the embedding cache.

    The corpus repeats the fixtures with a pass mark in each title ("(set 3)"): each text
    without its mark is embedded by the real model once, and each marked copy gets that
    vector with a little seeded noise, so the vectors cluster as real ones do (HNSW inserts
    of uniformly random vectors cost several times more than real ones).
    """
    from rag_pipeline.core.embedding import text_sha256
    from rag_pipeline.core.records import ChunkedRecord
    from rag_pipeline.store import stages
    from rag_pipeline.store.cache import store_vectors
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.runtime import load_embedder, load_second_embedder

    settings = load_settings()
    models = [load_embedder(settings)]
    second = load_second_embedder(settings)
    if second is not None:
        models.append(second)
    texts: dict[str, str] = {}  # sha -> the text without its pass mark
    with connect(conninfo) as conn:
        rows = conn.execute(
            "SELECT doc_key FROM rag.stage_documents WHERE asset_key = 'files/chunks'"
        ).fetchall()
        keys = sorted(str(r[0]) for r in rows)
        for _, record in stages.load_records(conn, "files/chunks", ChunkedRecord, keys):
            for chunk in record.chunks:
                base = re.sub(r" \(set \d+\)", "", chunk.embedded_text)
                texts[text_sha256(chunk.embedded_text)] = base
    bases = sorted(set(texts.values()))
    position = {text: n for n, text in enumerate(bases)}
    ordered = sorted(texts)
    rng = np.random.default_rng(48)
    with connect(conninfo, autocommit=True) as conn:
        for model in models:
            started = time.perf_counter()
            real = np.asarray(model.embed_passages(bases), dtype=np.float32)
            print(
                f"  {model.model_id}: {len(bases)} distinct texts in "
                f"{time.perf_counter() - started:.1f} s"
            )
            for start in range(0, len(ordered), 5000):
                batch = ordered[start : start + 5000]
                vectors = real[[position[texts[sha]] for sha in batch]]
                vectors = vectors + 0.02 * rng.standard_normal(vectors.shape, dtype=np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                store_vectors(conn, model.model_id, list(zip(batch, vectors, strict=True)))
    print(f"  {len(ordered)} texts per model")


if __name__ == "__main__":
    os.environ.setdefault("RAG_LOG_LEVEL", "WARNING")
    if sys.argv[1:2] == ["--fill-cache"]:
        fill_cache(sys.argv[2])
    else:
        main()
