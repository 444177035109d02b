"""What the embeddings step costs beyond its model: the step against the bare model.

    PYTHONPATH=$PWD python benchmarks/embed_step.py [--docs 3000] [--shared ../shared]

Generates the corpus of `benchmarks/ingest.py` in a temporary folder, ingests it into a fresh
embedded PostgreSQL under a temporary RAG_HOME in two Dagster runs (raw → chunks, then the
embeddings step alone), then embeds the same chunk texts with the bare model in the same
process, and prints for the embeddings step its wall seconds, the model's seconds inside
it, the CPU seconds of this process and of the database server during it, and the bare
model's seconds on the same texts. The difference is what writing the index (rows, cache,
HNSW and full-text indexes) costs beside the model on this machine.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.ingest import (
    _cpu_seconds,
    _server_pids,
    embedded_home,
    generate_corpus,
    process_cpu,
)

REPO = Path(__file__).resolve().parents[1]

BEFORE_EMBEDDINGS = ["files/raw", "files/markdown", "files/sanitized", "files/chunks"]


def main() -> None:
    """Parse the arguments, ingest, and print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=3000)
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    args = parser.parse_args()
    if not (args.shared / "fixtures").is_dir():
        sys.exit(f"fixtures not found under {args.shared}; pass --shared")
    with tempfile.TemporaryDirectory(prefix="rag-embed-step-") as tmp:
        home = embedded_home(Path(tmp))
        corpus = Path(tmp) / "corpus"
        generate_corpus(args.shared, corpus, args.docs)
        run(corpus, home)


def run(corpus: Path, home: Path) -> None:
    """Ingest `corpus` in two runs and print the embeddings step's figures."""
    import dagster as dg

    from rag_pipeline.definitions import defs
    from rag_pipeline.operations.folders import register_folder
    from rag_pipeline.orchestration.source_registry import FILES
    from rag_pipeline.settings import load_settings
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.runtime import load_embedder, ready_conninfo
    from rag_pipeline.store.server import stop_embedded_server

    settings = load_settings()
    try:
        conninfo = ready_conninfo(settings)
        embedder = load_embedder(settings)
        key = register_folder(settings, corpus).name
        instance = dg.DagsterInstance.ephemeral()
        instance.add_dynamic_partitions("files_folders", [key])
        job = defs().resolve_job_def(FILES.ingest_job)

        def materialize(names: list[str]) -> dg.ExecuteInProcessResult:
            result = job.execute_in_process(
                instance=instance,
                partition_key=key,
                asset_selection=[dg.AssetKey.from_user_string(name) for name in names],
                run_config={"loggers": {"console": {"config": {"log_level": "ERROR"}}}},
            )
            assert result.success
            return result

        materialize(BEFORE_EMBEDDINGS)
        started, own, server = time.perf_counter(), process_cpu(), _cpu_seconds(_server_pids(home))
        result = materialize(["files/embeddings"])
        wall = time.perf_counter() - started
        own, server = process_cpu() - own, _cpu_seconds(_server_pids(home)) - server
        (event,) = result.asset_materializations_for_node("files__embeddings")
        inside = float(event.metadata["embed_seconds"].value)  # type: ignore[arg-type]
        with connect(conninfo) as conn:
            texts = [r[0] for r in conn.execute("SELECT embedded_text FROM rag.chunks ORDER BY id")]
        started, cpu = time.perf_counter(), process_cpu()
        embedder.embed_passages(texts)
        bare, bare_cpu = time.perf_counter() - started, process_cpu() - cpu
        print(f"{len(texts)} chunks")
        print(
            f"embeddings step: {wall:.1f} s (model inside: {inside:.1f} s); CPU s: this "
            f"process {own:.1f}, database server {server:.1f} "
            f"({1000 * server / max(1, len(texts)):.2f} ms per chunk)"
        )
        print(f"bare model on the same texts: {bare:.1f} s ({bare_cpu:.1f} CPU s)")
        print(f"step / bare model: {wall / bare:.2f}")
    finally:
        stop_embedded_server(settings)


if __name__ == "__main__":
    main()
