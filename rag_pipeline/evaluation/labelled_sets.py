"""Labelled sets in one file: a question per JSONL line, with its relevant documents graded.

    {"id": "demo-01", "question": "Where do I keep my suppliers?", "language": "en_US",
     "relevant": [{"source_type": "files", "source_id": "business-partner-setup.md", "grade": 2}]}

`id` is unique in its file; `language` only groups the report (search detects the query's own);
a `grade` > 0 is relevant (default 1). Documents are named as `rag eval`'s qrels name them
(`metrics.py`: a files document by its path inside the ingested folder). The set's name is the
file's stem. The older pair of files (queries.jsonl + qrels.tsv) is read by `metrics.py`; both
become the same `LabelledSet`.

A line that cannot be read is an `EvaluationInputError` naming the file and the line: one bad
line refuses the file, so a half-read set never scores as a worse set.
"""

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import cast

from rag_pipeline.evaluation.metrics import (
    DocKey,
    EvalQuery,
    EvaluationInputError,
    load_qrels,
    load_queries,
)

# The set shipped with the package: questions over the bundled demo data (`rag_pipeline/demo`).
BUNDLED_SET = "demo"


@dataclass(frozen=True)
class LabelledSet:
    """Questions and their graded relevant documents (query id -> document -> grade)."""

    name: str
    queries: list[EvalQuery]
    qrels: dict[str, dict[DocKey, int]]


def load_set(path: Path) -> LabelledSet:
    """Read a one-file set (JSONL, the format above)."""
    queries: list[EvalQuery] = []
    qrels: dict[str, dict[DocKey, int]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise EvaluationInputError(f"{path}: not UTF-8 text") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        query, labels = _question(line, f"{path}:{number}")
        if query.id in qrels:
            raise EvaluationInputError(f'{path}:{number}: id "{query.id}" is used twice')
        queries.append(query)
        qrels[query.id] = labels
    return LabelledSet(path.stem, queries, qrels)


def _question(line: str, where: str) -> tuple[EvalQuery, dict[DocKey, int]]:
    try:
        raw: object = json.loads(line)
    except json.JSONDecodeError as exc:
        raise EvaluationInputError(f"{where}: not JSON ({exc.msg})") from None
    record = cast(dict[str, object], raw) if isinstance(raw, dict) else {}
    ident, text, language = record.get("id"), record.get("question"), record.get("language", "")
    relevant = record.get("relevant")
    if not isinstance(ident, str | int) or not isinstance(text, str) or not text.strip():
        raise EvaluationInputError(f'{where}: needs "id" and a non-empty "question"')
    if not isinstance(language, str):
        raise EvaluationInputError(f'{where}: "language" must be a string such as "en_US"')
    if not isinstance(relevant, list) or not relevant:
        raise EvaluationInputError(f'{where}: needs "relevant", a list of documents')
    labels: dict[DocKey, int] = {}
    for item in cast(list[object], relevant):
        key, grade = _document(item, where)
        labels[key] = grade
    return EvalQuery(str(ident), text, language), labels


def _document(item: object, where: str) -> tuple[DocKey, int]:
    document = cast(dict[str, object], item) if isinstance(item, dict) else {}
    source_type, source_id = document.get("source_type"), document.get("source_id")
    grade = document.get("grade", 1)
    if not isinstance(source_type, str) or not isinstance(source_id, str) or not source_id:
        raise EvaluationInputError(
            f'{where}: each relevant document needs "source_type" and "source_id"'
        )
    if not isinstance(grade, int) or isinstance(grade, bool) or grade < 0:
        raise EvaluationInputError(f'{where}: "grade" must be an integer of 0 or more')
    return (source_type, source_id), grade


def load_pair(queries: Path, qrels: Path) -> LabelledSet:
    """The older two-file set (queries.jsonl + qrels.tsv) as a `LabelledSet`."""
    return LabelledSet(
        queries.parent.name or queries.stem, load_queries(queries), load_qrels(qrels)
    )


def load_folder(folder: Path) -> list[LabelledSet]:
    """Every `*.jsonl` set of a folder, by name; a folder that is missing is an error."""
    if not folder.is_dir():
        raise EvaluationInputError(f"RAG_QUALITY_SETS_DIR: {folder} is not a folder")
    return [load_set(path) for path in sorted(folder.glob("*.jsonl"))]


def bundled_set() -> LabelledSet:
    """The demo set shipped in the package."""
    files = resources.files("rag_pipeline.evaluation") / "sets" / f"{BUNDLED_SET}.jsonl"
    with resources.as_file(files) as path:
        return load_set(path)


def configured_sets(folder: Path | None, bundled: bool) -> list[LabelledSet]:
    """The sets the quality asset scores: the bundled one (unless turned off), then the user's.

    A user's set named like the bundled one replaces it.
    """
    own = load_folder(folder) if folder is not None else []
    names = {s.name for s in own}
    first = [bundled_set()] if bundled and BUNDLED_SET not in names else []
    return [*first, *own]
