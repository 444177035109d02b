"""Every search mode on the labelled set: nDCG@10, Recall@5/10, MRR@10, hit@1 per language.

    python benchmarks/eval/measure.py [--shared ../shared] [--home DIR] [--keep]

Builds the corpus of build_corpus.py, indexes it straight into a scratch database of the
embedded server under --home (real chunker, real model; no Dagster run, so it works while the
ingestion pipeline changes) and runs queries.jsonl / qrels.tsv through `Searcher.search` in
each mode, fusion and keyword scorer.
"""

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.eval.build_corpus import build  # noqa: E402
from rag_pipeline_tests.search_support import Doc, index_documents  # noqa: E402

CONFIGS: list[tuple[str, dict[str, object], dict[str, object]]] = [
    ("vector", {"mode": "vector"}, {}),
    ("keyword ts_rank", {"mode": "keyword"}, {"scorer": "ts_rank"}),
    ("keyword bm25", {"mode": "keyword"}, {}),
    ("hybrid rrf ts_rank", {"mode": "hybrid", "fusion": "rrf"}, {"scorer": "ts_rank"}),
    ("hybrid rrf bm25", {"mode": "hybrid", "fusion": "rrf"}, {}),
    ("hybrid minmax ts_rank", {"mode": "hybrid", "fusion": "minmax"}, {"scorer": "ts_rank"}),
    ("hybrid minmax bm25", {"mode": "hybrid", "fusion": "minmax"}, {}),
    ("hybrid tmm ts_rank", {"mode": "hybrid", "fusion": "tmm"}, {"scorer": "ts_rank"}),
    ("hybrid tmm bm25", {"mode": "hybrid", "fusion": "tmm"}, {}),
]


def corpus_docs(folder: Path) -> list[Doc]:
    """The built corpus as documents, front matter read as the files source reads it."""
    docs: list[Doc] = []
    for path in sorted(folder.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        front: dict[str, object] = {}
        if text.startswith("---\n"):
            head, _, text = text[4:].partition("\n---\n")
            front = yaml.safe_load(head) or {}
        title = str(
            front.get("title")
            or next(
                (line[2:].strip() for line in text.splitlines() if line.startswith("# ")), path.stem
            )
        )
        docs.append(
            Doc(
                source_type="files",
                source_id=f"{folder}/{path.relative_to(folder)}",
                title=title,
                markdown=text.lstrip("\n"),
                language=str(front.get("language") or "en_US"),
            )
        )
    return docs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--home", type=Path, default=Path(tempfile.gettempdir()) / "rag_eval")
    parser.add_argument("--database", help="reuse this already indexed database URL")
    parser.add_argument("--only", help="run only configs whose name contains this")
    args = parser.parse_args()

    from rag_pipeline.evaluation.metrics import evaluate, load_qrels, load_queries
    from rag_pipeline.search.engine import Searcher
    from rag_pipeline.settings import load_settings
    from rag_pipeline.store.runtime import load_embedder
    from rag_pipeline.store.server import resolve_conninfo

    settings = load_settings(home=args.home)
    embedder = load_embedder(settings)
    conninfo = args.database
    if conninfo is None:
        admin = resolve_conninfo(settings)
        name = f"eval_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        conninfo = admin.replace("/rag?", f"/{name}?")
        with tempfile.TemporaryDirectory() as tmp:
            build(Path(tmp), args.shared)
            docs = corpus_docs(Path(tmp))
            started = time.perf_counter()
            chunks = index_documents(conninfo, docs, embedder)
        print(
            f"indexed {len(docs)} documents, {chunks} chunks in "
            f"{time.perf_counter() - started:.0f} s: {conninfo}"
        )
    queries = load_queries(HERE / "queries.jsonl")
    qrels = load_qrels(HERE / "qrels.tsv")
    print(
        f"{'mode':<22}{'language':<10}{'nDCG@10':>9}{'R@5':>7}{'R@10':>7}{'MRR@10':>8}{'hit@1':>7}"
    )
    for name, kwargs, extra in CONFIGS:
        if args.only and args.only not in name:
            continue
        searcher = Searcher(
            settings,
            embedder=embedder,
            conninfo=conninfo,
            keyword_scorer=extra.get("scorer", "bm25"),  # type: ignore[arg-type]
        )
        report = evaluate(
            lambda text, kw=kwargs, s=searcher: s.search(text, top_k=10, **kw),  # type: ignore[misc]
            queries,
            qrels,
        )
        for language, values in [*report.by_language.items(), ("all", report.overall)]:
            print(
                f"{name:<22}{language:<10}{values['ndcg@10']:>9.3f}{values['recall@5']:>7.3f}"
                f"{values['recall@10']:>7.3f}{values['mrr@10']:>8.3f}{values['hit@1']:>7.3f}"
            )


if __name__ == "__main__":
    main()
