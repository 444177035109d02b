"""Load time, chunking, passages/s, query ms and peak memory of each embedding model.

    python benchmarks/embedding_models.py [--shared ../shared] [--queries 60] [--only ID]

Each model runs in a fresh process (so peak RSS is its own): the bundled MiniLM and the two
multilingual models of the `multilingual` extra (skipped when not installed). The process
loads the model through `open_embedder` (checksums included), cuts the fixtures' 47 wiki
pages into chunks counted in the model's own tokens (target 200, at most the model's
maximum), embeds every chunk, then embeds English and Spanish labelled questions one at a
time (after one warm-up). Prints one Markdown table row per model and the load average:
on a shared machine compare the rows of one run, not figures of different runs.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = ("all-MiniLM-L6-v2-int8", "use-multilingual-v3", "multilingual-e5-small-q4")
QUESTION_FILES = ("queries.jsonl", "spanish_and_identifier_queries.jsonl")


def child(model_id: str, shared: Path, queries: int) -> dict[str, float]:
    """Measure one model in this process."""
    from rag_pipeline.core.chunking import ChunkingSettings, chunk_markdown
    from rag_pipeline.core.embedding import ModelSpec, open_embedder

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as models:
        embedder = open_embedder(ModelSpec(model_id), models_dir=Path(models))
        load = time.perf_counter() - started
        settings = ChunkingSettings(
            target_tokens=min(200, embedder.max_tokens), max_tokens=embedder.max_tokens
        )
        started = time.perf_counter()
        texts: list[str] = []
        tokens = 0
        for page in sorted((shared / "fixtures" / "wiki" / "docs_md").glob("*.md")):
            _, chunks = chunk_markdown(
                page.read_text(encoding="utf-8"),
                title=page.stem,
                breadcrumb="wiki",
                count_tokens=embedder.token_counter,
                settings=settings,
                time_budget_seconds=None,
            )
            texts += [chunk.embedded_text for chunk in chunks]
            tokens += sum(chunk.token_count for chunk in chunks)
        chunking = time.perf_counter() - started
        started = time.perf_counter()
        embedder.embed_passages(texts)
        embedding = time.perf_counter() - started
        questions = _questions(queries)
        embedder.embed_query(questions[0])
        timings: list[float] = []
        for question in questions:
            started = time.perf_counter()
            embedder.embed_query(question)
            timings.append((time.perf_counter() - started) * 1000)
    return {
        "load_s": load,
        "chunks": len(texts),
        "tokens_per_chunk": tokens / max(1, len(texts)),
        "chunking_s": chunking,
        "passages_per_s": len(texts) / embedding,
        "query_ms_p50": statistics.median(timings),
        "query_ms_p95": statistics.quantiles(timings, n=20)[-1],
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _questions(count: int) -> list[str]:
    """`count` questions, half English and half Spanish, from the labelled sets."""
    half: list[list[str]] = []
    for name in QUESTION_FILES:
        lines = (REPO / "benchmarks" / "eval" / name).read_text(encoding="utf-8").splitlines()
        half.append([json.loads(line)["text"] for line in lines if line.strip()][: count // 2])
    return half[0] + half[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--only", help="measure only this model id")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.shared, args.queries)))
        return
    print(f"load average before: {os.getloadavg()}")
    print(
        "| model | load s | chunks (tokens each) | chunking s | passages/s | query ms p50 / p95 "
        "| peak RSS MiB |\n| --- | --- | --- | --- | --- | --- | --- |"
    )
    for model_id in MODELS:
        if args.only and args.only != model_id:
            continue
        command = [sys.executable, __file__, "--child", model_id, "--shared", str(args.shared)]
        command += ["--queries", str(args.queries)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"| {model_id} | not measured: {done.stderr.strip().splitlines()[-1]} |")
            continue
        f = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"| {model_id} | {f['load_s']:.2f} | {f['chunks']:.0f} ({f['tokens_per_chunk']:.0f}) "
            f"| {f['chunking_s']:.1f} | {f['passages_per_s']:.1f} "
            f"| {f['query_ms_p50']:.1f} / {f['query_ms_p95']:.1f} | {f['peak_mib']:.0f} |"
        )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
