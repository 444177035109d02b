"""Hybrid nDCG@10 by question language × answer source, with the second vector off and on.

    export RAG_HOME=/tmp/eval RAG_LANGUAGES=en_US,es_CO
    rag ingest --source ad_metadata && rag ingest --path ../shared/fixtures/wiki/docs_md
    python -m benchmarks.eval.cross_language [--out FILE]

Every labelled set (as `results.py` reads them), each question searched twice on the same
index: with RAG_MULTILINGUAL_MODEL=none (every question on the first model's vectors, as before
the second vector) and with the configured multilingual model. A question is grouped by its
language and by the source type of its main answer (the first label of the top grade):
"es_CO → files" is a Spanish question whose answer is an English wiki page. Prints one
Markdown table for the sets not held out and one for the held-out ones, and writes the
per-question figures to --out (default benchmarks/results/<date>-cross-language.json).
"""

import argparse
import datetime
import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.eval.results import HELD_OUT, RESULTS, labelled_sets


def _group(language: str, labels: dict[Any, int]) -> str:
    best = max(labels.values())
    source = next(key for key, grade in labels.items() if grade == best)[0]
    return f"{language} → {'wiki' if source == 'files' else 'dictionary'}"


def measure() -> dict[str, dict[str, dict[str, float]]]:
    """{set: {question id: {"group", "off", "on"}}}."""
    from rag_pipeline.evaluation.metrics import evaluate, load_qrels, load_queries
    from rag_pipeline.search.engine import Searcher
    from rag_pipeline.settings import load_settings

    settings = load_settings()
    on = Searcher(settings)
    off = Searcher(settings.model_copy(update={"multilingual_model": "none"}), embedder=on.embedder)
    found: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (queries_path, qrels_path) in labelled_sets(Path(tmp)).items():
            queries, qrels = load_queries(queries_path), load_qrels(qrels_path)
            reports = {
                label: evaluate(
                    lambda text, s=searcher: s.search(text, top_k=10, mode="hybrid"),
                    queries,
                    qrels,
                )
                for label, searcher in (("off", off), ("on", on))
            }
            rows: dict[str, dict[str, Any]] = {}
            for result in reports["off"].queries:
                rows[result.id] = {
                    "group": _group(result.language, qrels[result.id]),
                    "off": result.metrics["ndcg@10"],
                }
            for result in reports["on"].queries:
                rows[result.id]["on"] = result.metrics["ndcg@10"]
            found[name] = rows
    return found


def table(found: dict[str, dict[str, dict[str, Any]]], held_out: bool) -> str:
    """Mean nDCG@10 off → on per group, over the sets held out or not."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for name, rows in found.items():
        if (name in HELD_OUT) == held_out:
            for row in rows.values():
                groups[row["group"]].append(row)
                groups["all"].append(row)
    lines = [
        "| questions | n | second vector off | on | change |",
        "| --- | --- | --- | --- | --- |",
    ]
    for group in sorted(groups, key=lambda g: (g == "all", g)):
        rows = groups[group]
        off = sum(r["off"] for r in rows) / len(rows)
        on = sum(r["on"] for r in rows) / len(rows)
        lines.append(f"| {group} | {len(rows)} | {off:.3f} | {on:.3f} | {on - off:+.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    found = measure()
    print("Sets not held out:\n")
    print(table(found, held_out=False))
    print("\nHeld-out sets:\n")
    print(table(found, held_out=True))
    print("\ntwenty_first (held out):\n")
    print(table({"twenty_first": found["twenty_first"]}, held_out=True))
    out = args.out or RESULTS / f"{datetime.date.today()}-cross-language.json"
    out.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
