"""Every labelled set in every mode on an ingested index: one JSON file of figures.

    export RAG_HOME=/tmp/eval RAG_LANGUAGES=en_US,es_CO
    rag ingest --source ad_metadata && rag ingest --path ../shared/fixtures/wiki/docs_md
    python -m benchmarks.eval.results [--modes hybrid,vector,keyword] [--out FILE]

Writes benchmarks/results/<date>[-<label>].json (or --out): per set and mode nDCG@10,
Recall@5/10, MRR@10 and hit@1 per language and overall, the query latency (p50/p95 ms, one
client) and the RAG_SEARCH_* variables it ran with (set one to measure a part's worth, e.g.
RAG_SEARCH_VOCABULARY_WEIGHT=0 with --label no-vocabulary).
The first set is scored with the dedicated sources' judgements (`dedicated_qrels.py`); the
held-out sets (`HELD_OUT`) are marked so: they are never read for tuning.
"""

import argparse
import datetime
import io
import json
import os
import statistics
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from benchmarks.eval import dedicated_qrels

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results"
# Frozen as held-out: no vocabulary line quotes them, no ranking constant was tuned on them
# after this was written (rag_pipeline_tests/test_labelled_sets.py checks the first rule).
HELD_OUT = ("eighteenth", "nineteenth", "twentieth", "twenty_first")
BLIND = [
    *("second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"),
    *("eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth"),
    *("seventeenth", "eighteenth", "nineteenth", "twentieth", "twenty_first"),
]


def labelled_sets(tmp: Path) -> dict[str, tuple[Path, Path]]:
    """Set name -> (queries.jsonl, qrels.tsv), the first set's judgements written to `tmp`."""
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        dedicated_qrels.main()
    first_qrels = tmp / "first_qrels.tsv"
    first_qrels.write_text(buffer.getvalue(), encoding="utf-8")
    sets = {"first": (HERE / "queries.jsonl", first_qrels)}
    for name in BLIND:
        sets[name] = (HERE / f"{name}_set" / "queries.jsonl", HERE / f"{name}_set" / "qrels.tsv")
    return sets


def measure(modes: list[str], only: list[str] | None, tmp: Path) -> dict[str, object]:
    """The figures of every set (or `only` these) in every mode."""
    from rag_pipeline.evaluation.metrics import evaluate, load_qrels, load_queries
    from rag_pipeline.search.engine import Searcher

    searcher = Searcher()
    searcher.search("warm up the model and the pool", top_k=10)
    sets: dict[str, object] = {}
    for name, (queries_path, qrels_path) in labelled_sets(tmp).items():
        if only and name not in only:
            continue
        queries, qrels = load_queries(queries_path), load_qrels(qrels_path)
        by_mode: dict[str, object] = {}
        for mode in modes:
            times: list[float] = []

            def timed(text: str, mode: str = mode, times: list[float] = times) -> list[object]:
                started = time.perf_counter()
                hits = searcher.search(text, top_k=10, mode=mode)  # type: ignore[arg-type]
                times.append((time.perf_counter() - started) * 1000)
                return hits  # type: ignore[return-value]

            report = evaluate(timed, queries, qrels)  # type: ignore[arg-type]
            by_mode[mode] = {
                "overall": report.overall,
                "by_language": report.by_language,
                "latency_ms": {
                    "p50": round(statistics.median(times), 1),
                    "p95": round(statistics.quantiles(times, n=20)[-1], 1),
                },
            }
        sets[name] = {"held_out": name in HELD_OUT, "queries": len(queries), "modes": by_mode}
    return sets


def markdown_table(record: dict[str, Any]) -> str:
    """One row per set: nDCG@10 (hit@1) per mode, and the hybrid p95 latency."""
    sets: dict[str, Any] = record["sets"]
    modes = list(next(iter(sets.values()))["modes"])
    lines = [
        "| set | " + " | ".join(f"{m} nDCG@10 (hit@1)" for m in modes) + " | hybrid p95 ms |",
        "| --- |" + " --- |" * (len(modes) + 1),
    ]
    for name in [n for n in ("first", *BLIND) if n in sets]:
        figures = sets[name]
        cells = [
            f"{v['overall']['ndcg@10']:.3f} ({v['overall']['hit@1']:.3f})"
            for v in figures["modes"].values()
        ]
        label = f"{name} (held out)" if figures["held_out"] else name
        p95 = figures["modes"].get("hybrid", {}).get("latency_ms", {}).get("p95", "")
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {p95} |")
    return "\n".join(lines)


def _mean_ndcg(record: dict[str, Any], held_out: bool) -> float:
    values = [
        figures["modes"]["hybrid"]["overall"]["ndcg@10"]
        for figures in record["sets"].values()
        if figures["held_out"] is held_out
    ]
    return statistics.fmean(values)


def parts_table(base: dict[str, Any], others: list[dict[str, Any]]) -> str:
    """Hybrid nDCG@10 without each part (held-out sets, other sets) and what that costs."""
    lines = [
        "| run | held-out sets | cost | other sets | cost |",
        "| --- | --- | --- | --- | --- |",
        f"| everything on | {_mean_ndcg(base, True):.3f} | | {_mean_ndcg(base, False):.3f} | |",
    ]
    for record in others:
        held, rest = _mean_ndcg(record, True), _mean_ndcg(record, False)
        lines.append(
            f"| {record['label']} | {held:.3f} | {_mean_ndcg(base, True) - held:+.3f} "
            f"| {rest:.3f} | {_mean_ndcg(base, False) - rest:+.3f} |"
        )
    return "\n".join(lines)


def compare_table(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Per set, hybrid nDCG@10 before and after (overall and per language), and the hybrid
    p50/p95 latency of both runs."""
    lines = [
        "| set | nDCG@10 before | after | en before | after | es before | after "
        "| p50 ms before | after | p95 ms before | after |",
        "| --- |" + " --- |" * 10,
    ]
    for name in [n for n in ("first", *BLIND) if n in before["sets"] and n in after["sets"]]:
        runs = [record["sets"][name]["modes"]["hybrid"] for record in (before, after)]
        cells: list[str] = []
        for part in ("overall", "en_US", "es_CO"):
            for run in runs:
                figures = run["overall"] if part == "overall" else run["by_language"].get(part)
                cells.append(f"{figures['ndcg@10']:.3f}" if figures else "-")
        for quantile in ("p50", "p95"):
            cells += [f"{run['latency_ms'][quantile]:.1f}" for run in runs]
        label = f"{name} (held out)" if before["sets"][name]["held_out"] else name
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="hybrid,vector,keyword")
    parser.add_argument("--only", help="comma-separated set names (default: every set)")
    parser.add_argument("--label", help="what this run changes (names the file)")
    parser.add_argument("--table", type=Path, help="print a results file as a Markdown table")
    parser.add_argument(
        "--parts", type=Path, nargs="+", help="BASE LABELLED...: what each labelled run costs"
    )
    parser.add_argument(
        "--compare", type=Path, nargs=2, help="BEFORE AFTER: hybrid figures of two runs"
    )
    parser.add_argument("--out", type=Path, help="default: benchmarks/results/<date>.json")
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(p.read_text(encoding="utf-8")) for p in args.compare)
        print(compare_table(before, after))
        return
    if args.table:
        print(markdown_table(json.loads(args.table.read_text(encoding="utf-8"))))
        return
    if args.parts:
        base, *others = (json.loads(p.read_text(encoding="utf-8")) for p in args.parts)
        print(parts_table(base, others))
        return
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        sets = measure(
            args.modes.split(","), args.only.split(",") if args.only else None, Path(tmp)
        )
    today = datetime.date.today().isoformat()
    out = args.out or RESULTS / f"{today}{'-' + args.label if args.label else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    variables = {k: v for k, v in os.environ.items() if k.startswith("RAG_SEARCH_")}
    record = {"date": today, "label": args.label, "environment": variables, "sets": sets}
    out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    for name, figures in sets.items():
        modes = figures["modes"]  # type: ignore[index]
        cells = "  ".join(
            f"{mode} {values['overall']['ndcg@10']:.3f}"  # type: ignore[index]
            for mode, values in modes.items()  # type: ignore[union-attr]
        )
        print(f"{name:<12}{cells}")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
