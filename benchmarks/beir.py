"""A BEIR data set through the real pipeline: Markdown files, `rag ingest`, `rag eval`.

    python benchmarks/beir.py DATASET_DIR [--split test] [--home DIR] [--modes hybrid,vector]

DATASET_DIR is a BEIR data set as its authors publish it (scifact, nfcorpus, fiqa ...: unzip
`https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/<name>.zip`; this script
downloads nothing): `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl` (`_id`, `text`)
and `qrels/<split>.tsv` (`query-id`, `corpus-id`, `score`).

1. Every corpus document becomes one Markdown file, `# title` then the text, under
   `<home>/beir/<name>/corpus/`; the split's queries and qrels are written in `rag eval`'s
   formats beside it.
2. `rag ingest --path` indexes the folder (embedded PostgreSQL under `--home`, the configured
   model: the bundled MiniLM unless RAG_EMBEDDING_MODEL says otherwise), then `rag eval` scores
   each mode: nDCG@10, Recall@5, Recall@10, MRR@10 and hit@1 at document level.

Published nDCG@10 for comparison (BEIR leaderboard / MTEB): BM25 on scifact 0.665, nfcorpus
0.325; all-MiniLM-L6-v2 0.645 / 0.316; bge-small-en-v1.5 0.713 / 0.343.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MODES = ("hybrid", "vector", "keyword")
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}")


class DatasetError(ValueError):
    """A folder that is not a usable BEIR data set; the message names the file."""


@dataclass(frozen=True)
class Converted:
    """Where the converted set lies and how large it is."""

    corpus: Path
    queries: Path
    qrels: Path
    documents: int
    labelled_queries: int


def _jsonl(path: Path) -> Iterator[dict[str, object]]:
    if not path.is_file():
        raise DatasetError(f"{path} is missing: DATASET_DIR must hold a BEIR data set")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(record, dict) or "_id" not in record:
                raise DatasetError(f'{path}:{number}: a record needs "_id"')
            yield record


def file_name(doc_id: str) -> str:
    """The Markdown file name of a corpus id: the id itself when it is a safe name."""
    if _SAFE_NAME.fullmatch(doc_id) and doc_id not in {".", ".."}:
        return f"{doc_id}.md"
    return f"id-{doc_id.encode('utf-8').hex()[:200]}.md"


def markdown(title: str, text: str) -> str:
    """One corpus document as Markdown: the title as the heading, the text as its body."""
    title, text = " ".join(title.split()), text.strip()
    return f"# {title}\n\n{text}\n" if title else f"{text}\n"


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """A BEIR qrels file: query id -> {corpus id: grade}."""
    if not path.is_file():
        raise DatasetError(f"{path} is missing: no qrels for this split")
    qrels: dict[str, dict[str, int]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split("\t")
        if not line.strip() or fields[0] == "query-id":
            continue
        if len(fields) != 3:
            raise DatasetError(f"{path}:{number}: expected query-id, corpus-id, score")
        try:
            qrels.setdefault(fields[0], {})[fields[1]] = int(fields[2])
        except ValueError:
            raise DatasetError(f"{path}:{number}: the score must be an integer") from None
    return qrels


def convert(dataset: Path, out: Path, split: str = "test") -> Converted:
    """Write `dataset` under `out` as a Markdown folder plus `rag eval` queries and qrels."""
    qrels = read_qrels(dataset / "qrels" / f"{split}.tsv")
    corpus = out / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    names: dict[str, str] = {}
    for record in _jsonl(dataset / "corpus.jsonl"):
        doc_id = str(record["_id"])
        name = file_name(doc_id)
        names[doc_id] = name
        text = markdown(str(record.get("title") or ""), str(record.get("text") or ""))
        (corpus / name).write_text(text, encoding="utf-8")
    queries_out = out / "queries.jsonl"
    labelled = 0
    with queries_out.open("w", encoding="utf-8") as handle:
        for record in _jsonl(dataset / "queries.jsonl"):
            query_id = str(record["_id"])
            if any(grade > 0 for grade in qrels.get(query_id, {}).values()):
                line = {"id": query_id, "text": str(record.get("text") or "")}
                handle.write(json.dumps(line, ensure_ascii=False) + "\n")
                labelled += 1
    qrels_out = out / "qrels.tsv"
    with qrels_out.open("w", encoding="utf-8") as handle:
        handle.write("query_id\tsource_type\tsource_id\tgrade\n")
        for query_id, grades in qrels.items():
            for doc_id, grade in grades.items():
                if doc_id in names:
                    handle.write(f"{query_id}\tfiles\t{names[doc_id]}\t{grade}\n")
    return Converted(corpus, queries_out, qrels_out, len(names), labelled)


def rag(*args: str, env: dict[str, str]) -> str:
    """Run the installed `rag` command; its output, or exit with its error."""
    command = [sys.executable, "-m", "rag_pipeline.cli", *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"rag {' '.join(args[:2])} failed:\n{done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path, help="a BEIR data set folder (corpus.jsonl ...)")
    parser.add_argument("--split", default="test", help="qrels/<split>.tsv (default: test)")
    parser.add_argument(
        "--home",
        type=Path,
        default=Path(tempfile.gettempdir()) / "rag_beir",
        help="RAG_HOME of the run: its embedded server and index (default: %(default)s)",
    )
    parser.add_argument("--modes", default=",".join(MODES), help="modes to score, comma-separated")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if unknown := [m for m in modes if m not in MODES]:
        parser.error(f"unknown mode {unknown[0]!r}; use {', '.join(MODES)}")

    name = args.dataset.resolve().name
    try:
        converted = convert(args.dataset, args.home / "beir" / name, args.split)
    except DatasetError as exc:
        sys.exit(str(exc))
    env = {**os.environ, "RAG_HOME": str(args.home)}
    started = time.perf_counter()
    rag("ingest", "--path", str(converted.corpus), env=env)
    ingest_seconds = time.perf_counter() - started
    figures: dict[str, dict[str, float]] = {}
    for mode in modes:
        report = json.loads(
            rag(
                "eval",
                "--queries",
                str(converted.queries),
                "--qrels",
                str(converted.qrels),
                "--mode",
                mode,
                "--json",
                env=env,
            )
        )
        figures[mode] = report["overall"]
    if args.json:
        print(json.dumps({"dataset": name, "ingest_seconds": ingest_seconds, "modes": figures}))
        return
    print(
        f"{name}: {converted.documents:,} documents, {converted.labelled_queries:,} labelled "
        f"queries ({args.split}); rag ingest took {ingest_seconds:.0f} s"
    )
    print(f"{'mode':<10}{'nDCG@10':>9}{'R@5':>7}{'R@10':>7}{'MRR@10':>8}{'hit@1':>7}")
    for mode, values in figures.items():
        print(
            f"{mode:<10}{values['ndcg@10']:>9.3f}{values['recall@5']:>7.3f}"
            f"{values['recall@10']:>7.3f}{values['mrr@10']:>8.3f}{values['hit@1']:>7.3f}"
        )


if __name__ == "__main__":
    main()
