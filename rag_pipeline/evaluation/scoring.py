"""Labelled sets run through search and scored: what `rag eval` prints and the Dagster
`retrieval_quality` asset records. No Dagster here.

Before scoring, the labelled documents are looked up in the index: a label naming a document
the index does not hold is left out of the scoring and reported (`unknown`), never counted as a
miss; a question left with no relevant document it could find is not scored at all
(`unscored`). Each question is searched as a user's query is (`Searcher.search`, top 10) and
timed, so the report has the latency users would see on this index.
"""

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields

import psycopg

from rag_pipeline.evaluation.labelled_sets import LabelledSet
from rag_pipeline.evaluation.metrics import (
    METRICS,
    DocKey,
    EvalReport,
    QueryResult,
    evaluate,
    mean_metrics,
)
from rag_pipeline.search import Mode, Searcher, SearchHit, source_vocabularies
from rag_pipeline.settings.ranking import Ranking
from rag_pipeline.store.labels import held_documents

TOP_K = 10


@dataclass(frozen=True)
class ScoredQuestion:
    """One question's scores, what it expected (documents the index holds) and what came."""

    set_name: str
    result: QueryResult
    question: str
    expected: dict[DocKey, int]
    seconds: float

    @property
    def key(self) -> str:
        """`set/id`: unique across the sets of one report."""
        return f"{self.set_name}/{self.result.id}"


@dataclass(frozen=True)
class UnknownDocument:
    """A labelled document the index does not hold, and the question naming it."""

    set_name: str
    query_id: str
    document: DocKey

    def __str__(self) -> str:
        return f"{self.set_name}/{self.query_id}: {self.document[0]}:{self.document[1]}"


@dataclass(frozen=True)
class QualityReport:
    """Every set's questions scored, their means and the search's latency."""

    questions: list[ScoredQuestion]
    unknown: list[UnknownDocument]
    unscored: list[str]  # `set/id` of questions none of whose relevant documents are held

    @property
    def overall(self) -> dict[str, float]:
        """Mean metrics over every scored question."""
        return mean_metrics([q.result for q in self.questions])

    @property
    def by_language(self) -> dict[str, dict[str, float]]:
        """Mean metrics per question language."""
        languages = sorted({q.result.language for q in self.questions if q.result.language})
        return {
            language: mean_metrics(
                [q.result for q in self.questions if q.result.language == language]
            )
            for language in languages
        }

    @property
    def by_set(self) -> dict[str, dict[str, float]]:
        """Mean metrics per labelled set."""
        names = list(dict.fromkeys(q.set_name for q in self.questions))
        return {
            name: mean_metrics([q.result for q in self.questions if q.set_name == name])
            for name in names
        }

    def latency_ms(self, percent: float) -> float:
        """The `percent` percentile of the questions' search time (nearest rank), in ms."""
        times = sorted(q.seconds for q in self.questions)
        if not times:
            return 0.0
        rank = max(1, -(-len(times) * percent // 100))  # ceil without floats drifting
        return round(times[int(rank) - 1] * 1000, 2)

    def worst(self, count: int = 10) -> list[ScoredQuestion]:
        """The `count` questions of lowest nDCG@10 (then lowest MRR@10), in set order on ties."""
        ranked = sorted(
            self.questions, key=lambda q: (q.result.metrics["ndcg@10"], q.result.metrics["mrr@10"])
        )
        return ranked[:count]

    def as_eval_report(self) -> EvalReport:
        """The report in `rag eval`'s shape."""
        return EvalReport(
            queries=[q.result for q in self.questions],
            overall=self.overall,
            by_language=self.by_language,
        )


def score_sets(
    searcher: Searcher, sets: Sequence[LabelledSet], *, mode: Mode | None = None
) -> QualityReport:
    """Search every question of `sets` and score the rankings against the held documents."""
    labelled = {key for s in sets for labels in s.qrels.values() for key in labels}
    with psycopg.connect(searcher.conninfo) as conn:
        held = held_documents(conn, labelled)
    report = QualityReport([], [], [])
    timings: dict[str, float] = {}

    def run(text: str) -> list[SearchHit]:
        started = time.perf_counter()
        hits = searcher.search(text, top_k=TOP_K, mode=mode)
        timings[text] = time.perf_counter() - started
        return hits

    for labelled_set in sets:
        qrels = _held_labels(labelled_set, held, report)
        texts = {q.id: q.text for q in labelled_set.queries}
        report.questions.extend(
            ScoredQuestion(
                labelled_set.name,
                result,
                texts[result.id],
                qrels[result.id],
                timings[texts[result.id]],
            )
            for result in evaluate(run, labelled_set.queries, qrels).queries
        )
    return report


def _held_labels(
    labelled_set: LabelledSet, held: set[DocKey], report: QualityReport
) -> dict[str, dict[DocKey, int]]:
    """The set's labels of documents the index holds; the others go to the report."""
    qrels: dict[str, dict[DocKey, int]] = {}
    for query in labelled_set.queries:
        labels = labelled_set.qrels.get(query.id, {})
        report.unknown.extend(
            UnknownDocument(labelled_set.name, query.id, key) for key in labels if key not in held
        )
        kept = {key: grade for key, grade in labels.items() if key in held}
        if any(grade > 0 for grade in kept.values()):
            qrels[query.id] = kept
        elif labels:
            report.unscored.append(f"{labelled_set.name}/{query.id}")
    return qrels


def ranking_overrides(ranking: Ranking) -> str:
    """The ranking constants that differ from their defaults, `name=value,...` ("" if none)."""
    default = Ranking()
    return ",".join(
        f"{f.name}={getattr(ranking, f.name)}"
        for f in fields(Ranking)
        if getattr(ranking, f.name) != getattr(default, f.name)
    )


def vocabulary_fingerprint(searcher: Searcher) -> str:
    """What the search vocabulary adds, in 12 hex digits: its files (those the sources declare
    and RAG_SEARCH_VOCABULARY_DIR's) and the weights it is applied with; "off" at weight 0."""
    ranking = searcher.ranking
    if ranking.vocabulary_weight == 0:
        return "off"
    digest = hashlib.sha256(f"{ranking.vocabulary_weight}:{ranking.vocabulary_similarity}".encode())
    files = sorted(
        (vocabulary.origin(entry.name), entry.read_bytes())
        for vocabulary in source_vocabularies()
        for entry in vocabulary.tsv_files()
    )
    folder = searcher.settings.search_vocabulary_dir
    if folder is not None:
        files += sorted((f"dir/{p.name}", p.read_bytes()) for p in folder.glob("*.tsv"))
    for name, content in files:
        digest.update(name.encode() + b"\0" + content)
    return digest.hexdigest()[:12]


__all__ = [
    "METRICS",
    "QualityReport",
    "ScoredQuestion",
    "UnknownDocument",
    "ranking_overrides",
    "score_sets",
    "vocabulary_fingerprint",
]
