"""The evaluation metrics on rankings whose scores are known by hand."""

import math
from pathlib import Path

import pytest

from rag_pipeline.evaluation.metrics import (
    EvaluationInputError,
    load_qrels,
    load_queries,
    metrics,
)

A, B, C, D = ("files", "a.md"), ("files", "b.md"), ("files", "c.md"), ("files", "d.md")


def test_a_perfect_ranking_scores_one() -> None:
    assert metrics([A, B, C], {A: 2, B: 1}) == {
        "ndcg@10": 1.0,
        "recall@5": 1.0,
        "recall@10": 1.0,
        "mrr@10": 1.0,
        "hit@1": 1.0,
    }


def test_graded_gains_and_positions() -> None:
    found = metrics([C, B, D, A], {A: 2, B: 1})
    dcg = 1 / math.log2(3) + 2 / math.log2(5)
    ideal = 2 + 1 / math.log2(3)
    assert found["ndcg@10"] == pytest.approx(dcg / ideal)
    assert found["mrr@10"] == pytest.approx(1 / 2)
    assert found["hit@1"] == 0.0
    assert found["recall@5"] == 1.0


def test_answers_below_the_cutoffs_do_not_count() -> None:
    ranking = [("files", f"x{i}.md") for i in range(10)] + [A]
    assert metrics(ranking, {A: 1}) == {
        "ndcg@10": 0.0,
        "recall@5": 0.0,
        "recall@10": 0.0,
        "mrr@10": 0.0,
        "hit@1": 0.0,
    }
    assert metrics([*ranking[:5], A], {A: 1})["recall@10"] == 1.0
    assert metrics([*ranking[:5], A], {A: 1})["recall@5"] == 0.0


def test_inputs_are_read_and_bad_lines_named(tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": 7, "text": "x"}\n\n{"id": "b", "text": "y", "language": "es_CO"}\n')
    assert [(q.id, q.language) for q in load_queries(queries)] == [("7", ""), ("b", "es_CO")]
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query_id\tsource_type\tsource_id\tgrade\n7\tfiles\ta.md\t2\n")
    assert load_qrels(qrels) == {"7": {A: 2}}
    queries.write_text('{"id": 1}\n')
    with pytest.raises(EvaluationInputError, match=r"q.jsonl:1"):
        load_queries(queries)
    qrels.write_text("7\tfiles\ta.md\ttwo\n")
    with pytest.raises(EvaluationInputError, match=r"qrels.tsv:1: grade"):
        load_qrels(qrels)
