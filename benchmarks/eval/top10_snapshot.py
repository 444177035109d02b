"""The top 10 of every labelled question, to show a refactoring left the rankings alone.

    export RAG_HOME=/tmp/eval RAG_LANGUAGES=en_US,es_CO
    rag ingest --source ad_metadata && rag ingest --path ../shared/fixtures/wiki/docs_md
    python -m benchmarks.eval.top10_snapshot before.json        # on the old code
    python -m benchmarks.eval.top10_snapshot after.json         # on the new code
    python -m benchmarks.eval.top10_snapshot --compare before.json after.json

Writes `{"<set>/<query id>/<mode>": [[chunk id, score], ...]}` for every question of
benchmarks/eval/queries.jsonl and benchmarks/eval/*_set/queries.jsonl in hybrid, vector and
keyword mode; `--compare` prints how many lists are identical (ids, then ids and scores) and
exits 1 when an id list differs.
"""

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODES = ("hybrid", "vector", "keyword")


def question_files() -> dict[str, Path]:
    """Set name -> its queries.jsonl, the first set first."""
    files = {"first": HERE / "queries.jsonl"}
    for path in sorted(HERE.glob("*_set/queries.jsonl")):
        files[path.parent.name.removesuffix("_set")] = path
    return files


def snapshot() -> dict[str, list[list[object]]]:
    """Every question's top 10 in every mode: [chunk id, score] pairs."""
    from rag_pipeline.evaluation.metrics import load_queries
    from rag_pipeline.search import Searcher

    searcher = Searcher()
    lists: dict[str, list[list[object]]] = {}
    for name, path in question_files().items():
        for query in load_queries(path):
            for mode in MODES:
                hits = searcher.search(query.text, top_k=10, mode=mode)
                lists[f"{name}/{query.id}/{mode}"] = [[h.chunk_id, h.score] for h in hits]
    return lists


def compare(before: dict[str, list[list[object]]], after: dict[str, list[list[object]]]) -> int:
    """Print the comparison; 0 when every id list is identical."""
    keys = sorted(set(before) | set(after))

    def ids(lists: dict[str, list[list[object]]], key: str) -> list[object]:
        return [hit[0] for hit in lists.get(key, [])]

    same_ids = [k for k in keys if ids(before, k) == ids(after, k)]
    same_all = [k for k in keys if before.get(k) == after.get(k)]
    questions = {k.rsplit("/", 1)[0] for k in keys}
    print(f"{len(questions)} questions, {len(keys)} lists (question x mode)")
    print(f"identical ids: {len(same_ids)}; identical ids and scores: {len(same_all)}")
    for key in [k for k in keys if k not in same_ids][:20]:
        print("differs:", key)
    return 0 if len(same_ids) == len(keys) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", type=Path)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(p.read_text(encoding="utf-8")) for p in args.compare)
        return compare(before, after)
    if args.out is None:
        parser.error("give the output file, or --compare BEFORE AFTER")
    args.out.write_text(json.dumps(snapshot(), indent=0) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
