"""Retrieval quality on a labelled set: nDCG@10, Recall@5, Recall@10, MRR@10, hit@1.

Inputs, the usual TREC-style pair:

- queries.jsonl: one `{"id": ..., "text": ...}` per line (an optional `"language"` only groups
  the report; the search detects the language itself).
- qrels.tsv: `query_id<TAB>source_type<TAB>source_id<TAB>grade` (grade > 0 is relevant; a
  header line starting with `query_id` is skipped).

Hits are judged per document: a hit counts for `(source_type, source_id)` when its ids are
equal, or when the hit's source id ends with `/` + the labelled one (the files source names a
file by its full path; labels name it relative to the ingested folder). A document's later
hits (other sections) are skipped, so a ranking is a list of distinct documents. nDCG uses the
grade as linear gain.
"""

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from rag_pipeline.search import SearchHit

DocKey = tuple[str, str]  # (source_type, source_id)
Qrels = Mapping[str, Mapping[DocKey, int]]
METRICS = ("ndcg@10", "recall@5", "recall@10", "mrr@10", "hit@1")


class EvaluationInputError(ValueError):
    """A queries or qrels file that cannot be read; the message names the line."""


@dataclass(frozen=True)
class EvalQuery:
    """One labelled query."""

    id: str
    text: str
    language: str = ""


@dataclass(frozen=True)
class QueryResult:
    """The metrics of one query and the documents it ranked."""

    id: str
    language: str
    metrics: dict[str, float]
    ranked: list[DocKey]


@dataclass(frozen=True)
class EvalReport:
    """Per-query and mean metrics, overall and per query language."""

    queries: list[QueryResult]
    overall: dict[str, float]
    by_language: dict[str, dict[str, float]]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "overall": self.overall,
            "by_language": self.by_language,
            "queries": [{"id": q.id, "language": q.language, **q.metrics} for q in self.queries],
        }


def load_queries(path: Path) -> list[EvalQuery]:
    """Read queries.jsonl."""
    queries: list[EvalQuery] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw: object = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EvaluationInputError(f"{path}:{number}: not JSON ({exc.msg})") from None
        record = cast(dict[str, object], raw) if isinstance(raw, dict) else {}
        ident, text = record.get("id"), record.get("text")
        if not isinstance(ident, str | int) or not isinstance(text, str):
            raise EvaluationInputError(f'{path}:{number}: needs "id" and "text"')
        language = record.get("language")
        queries.append(EvalQuery(str(ident), text, language if isinstance(language, str) else ""))
    return queries


def load_qrels(path: Path) -> dict[str, dict[DocKey, int]]:
    """Read qrels.tsv into query id -> {(source_type, source_id): grade}."""
    qrels: dict[str, dict[DocKey, int]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith(("query_id", "#")):
            continue
        fields = line.split("\t")
        if len(fields) != 4:
            raise EvaluationInputError(
                f"{path}:{number}: expected query_id, source_type, source_id, grade (tabs)"
            )
        try:
            grade = int(fields[3])
        except ValueError:
            raise EvaluationInputError(f"{path}:{number}: grade must be an integer") from None
        qrels.setdefault(fields[0], {})[(fields[1], fields[2])] = grade
    return qrels


def _match(hit: SearchHit, labelled: Mapping[DocKey, int]) -> DocKey:
    """The labelled document a hit stands for, else the hit's own key."""
    key = (hit.source_type, hit.source_id)
    if key in labelled:
        return key
    for source_type, source_id in labelled:
        if source_type == hit.source_type and hit.source_id.endswith("/" + source_id):
            return (source_type, source_id)
    return key


def rank_documents(hits: Sequence[SearchHit], labelled: Mapping[DocKey, int]) -> list[DocKey]:
    """Distinct documents in hit order."""
    ranked: list[DocKey] = []
    for hit in hits:
        key = _match(hit, labelled)
        if key not in ranked:
            ranked.append(key)
    return ranked


def metrics(ranked: Sequence[DocKey], labelled: Mapping[DocKey, int]) -> dict[str, float]:
    """nDCG@10, Recall@5, Recall@10, MRR@10 and hit@1 (a relevant first document)."""
    relevant = {key for key, grade in labelled.items() if grade > 0}
    gains = [max(labelled.get(key, 0), 0) for key in ranked[:10]]
    dcg = sum(gain / math.log2(i + 2) for i, gain in enumerate(gains))
    ideal_gains = sorted((g for g in labelled.values() if g > 0), reverse=True)[:10]
    idcg = sum(gain / math.log2(i + 2) for i, gain in enumerate(ideal_gains))
    first = next((i for i, key in enumerate(ranked[:10]) if key in relevant), None)

    def recall(k: int) -> float:
        return len(set(ranked[:k]) & relevant) / len(relevant) if relevant else 0.0

    return {
        "ndcg@10": dcg / idcg if idcg else 0.0,
        "recall@5": recall(5),
        "recall@10": recall(10),
        "mrr@10": 1 / (first + 1) if first is not None else 0.0,
        "hit@1": 1.0 if first == 0 else 0.0,
    }


def mean_metrics(results: Sequence[QueryResult]) -> dict[str, float]:
    """The mean of each metric over `results` (0 for none)."""
    if not results:
        return dict.fromkeys(METRICS, 0.0)
    return {m: sum(r.metrics[m] for r in results) / len(results) for m in METRICS}


def evaluate(
    run_query: Callable[[str], Sequence[SearchHit]],
    queries: Sequence[EvalQuery],
    qrels: Qrels,
) -> EvalReport:
    """Run every labelled query through `run_query` and score the rankings.

    Queries without any label are skipped (they would score 0 whatever the ranking).
    """
    results: list[QueryResult] = []
    for query in queries:
        labelled = qrels.get(query.id)
        if not labelled:
            continue
        ranked = rank_documents(run_query(query.text), labelled)
        results.append(QueryResult(query.id, query.language, metrics(ranked, labelled), ranked))
    languages = sorted({r.language for r in results if r.language})
    return EvalReport(
        queries=results,
        overall=mean_metrics(results),
        by_language={
            language: mean_metrics([r for r in results if r.language == language])
            for language in languages
        },
    )
