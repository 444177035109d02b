"""`rag search` (table, JSON, batch) and `rag eval` on the hand-made corpus with known answers."""

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from rag_pipeline.cli.search import register
from rag_pipeline_tests import search_fixtures
from rag_pipeline_tests.search_corpus import EVENTS, ORDERS_ES, PARTNERS, WAREHOUSE

indexed_db = search_fixtures.indexed_db  # the shared module-scoped fixture


@pytest.fixture
def rag(monkeypatch: pytest.MonkeyPatch, rag_home: Path, indexed_db: str) -> click.Group:
    """A `rag` group with only the search commands, pointed at the indexed database."""
    monkeypatch.setenv("RAG_HOME", str(rag_home))
    monkeypatch.setenv("RAG_VECTORDB_URL", indexed_db)
    monkeypatch.delenv("RAG_EMBEDDING_MODEL", raising=False)
    monkeypatch.delenv("RAG_SEARCH_MODE", raising=False)

    @click.group()
    def group() -> None:
        """rag (search commands only)."""

    register(group)
    return group


def test_search_prints_a_table(rag: click.Group) -> None:
    result = CliRunner().invoke(rag, ["search", "aisle bin level of a locator", "-k", "3"])
    assert result.exit_code == 0, result.output
    assert "Warehouse and locators" in result.output
    assert "Locators" in result.output


@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
def test_search_json_in_every_mode(rag: click.Group, mode: str) -> None:
    result = CliRunner().invoke(rag, ["search", "M_Locator", "--json", "--mode", mode, "-k", "2"])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.output)
    assert 1 <= len(hits) <= 2
    if mode != "vector":
        assert hits[0]["source_id"] == WAREHOUSE.source_id


def test_search_explain_and_filters(rag: click.Group) -> None:
    result = CliRunner().invoke(
        rag, ["search", "órdenes de venta", "--json", "--explain", "--lang", "es_CO"]
    )
    assert result.exit_code == 0, result.output
    hits = json.loads(result.output)
    assert hits[0]["source_id"] == ORDERS_ES.source_id
    assert {h["language"] for h in hits} == {"es_CO"}
    assert set(hits[0]["explain"]) == {
        "vector_rank",
        "vector_score",
        "keyword_rank",
        "keyword_score",
    }
    table = CliRunner().invoke(rag, ["search", "órdenes de venta", "--explain"])
    assert table.exit_code == 0, table.output
    assert "search vocabulary added" not in table.output
    supplier = CliRunner().invoke(rag, ["search", "supplier", "--explain"])
    assert supplier.exit_code == 0, supplier.output
    assert "search vocabulary added: business partner vendor" in supplier.output
    assert "another name" not in supplier.output
    assets = CliRunner().invoke(rag, ["search", "fixed assets", "--explain"])
    assert assets.exit_code == 0, assets.output
    assert "read as another name for the title 'asset'" in assets.output
    warned = CliRunner().invoke(
        rag,
        [
            "search",
            "I want to be warned automatically whenever something happens in the data, "
            "for example sales orders left in draft for more than a week",
            "--explain",
        ],
    )
    assert warned.exit_code == 0, warned.output
    caption = " ".join(warned.output.split())  # the table wraps the caption
    # No word in common with the query: the model reads the entry's words too.
    assert "closest vocabulary phrase 'alert schedule' (0.53) added: alert processor" in caption
    assert "keyword leg only" not in caption
    vendors = CliRunner().invoke(
        rag, ["search", "where do I maintain customers and vendors", "--explain"]
    )
    assert vendors.exit_code == 0, vendors.output
    caption = " ".join(vendors.output.split())
    added = "'product with several vendors' (0.62) added: vendor selection (keyword leg only)"
    assert added in caption


@pytest.mark.parametrize("query", ["", "   ", "x" * 2001])
def test_bad_queries_are_one_line_errors(rag: click.Group, query: str) -> None:
    result = CliRunner().invoke(rag, ["search", query])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ")
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_batch_runs_every_line_with_one_model(rag: click.Group, tmp_path: Path) -> None:
    queries = tmp_path / "queries.jsonl"
    lines = [
        {"id": "a", "text": "M_Locator"},
        {"id": "b", "text": "C_BPartner_ID"},
        {"id": "c", "text": "DocStatus"},
    ]
    queries.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(
        rag, ["search", "--queries", str(queries), "--json", "--mode", "keyword", "-k", "1"]
    )
    assert result.exit_code == 0, result.output
    out = [json.loads(line) for line in result.output.splitlines()]
    assert [o["id"] for o in out] == ["a", "b", "c"]
    assert [o["hits"][0]["source_id"] for o in out] == [
        WAREHOUSE.source_id,
        PARTNERS.source_id,
        EVENTS.source_id,
    ]


def test_a_batch_read_only_in_part_stops_quietly(
    monkeypatch: pytest.MonkeyPatch, rag_home: Path, indexed_db: str, tmp_path: Path
) -> None:
    # `rag search --queries q.jsonl --json | head -1`: the reader closes the pipe after one
    # line; the batch used to end on "Error: BrokenPipeError: [Errno 32] Broken pipe".
    queries = tmp_path / "queries.jsonl"
    lines = [json.dumps({"id": str(n), "text": "warehouse locator"}) for n in range(300)]
    queries.write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = {**os.environ, "RAG_HOME": str(rag_home), "RAG_VECTORDB_URL": indexed_db}
    command = [sys.executable, "-c", "from rag_pipeline.cli import main; main()"]
    args = ["search", "--queries", str(queries), "--json", "--mode", "keyword"]
    with subprocess.Popen(
        [*command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        first = json.loads(process.stdout.readline())
        process.stdout.close()
        errors = process.stderr.read().decode()
        assert process.wait(timeout=120) == 1
    assert first["id"] == "0"
    assert errors == ""


def test_batch_reports_a_bad_line_and_runs_the_rest(rag: click.Group, tmp_path: Path) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"id": 1, "text": ""}\nnot json\n{"id": 3, "text": "M_Locator"}\n')
    result = CliRunner().invoke(rag, ["search", "--queries", str(queries), "--json"])
    assert result.exit_code == 1
    out = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    assert [("error" in o) for o in out] == [True, True, False]
    assert out[2]["hits"]
    assert "Traceback" not in result.output


def test_batch_needs_json(rag: click.Group, tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": 1, "text": "locator"}\n')
    result = CliRunner().invoke(rag, ["search", "--queries", str(queries)])
    assert result.exit_code == 2
    assert "--json" in result.output


def test_eval_scores_a_set_with_known_answers(rag: click.Group, tmp_path: Path) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        '{"id": "q1", "text": "M_Locator", "language": "en_US"}\n'
        '{"id": "q2", "text": "C_BPartner_ID", "language": "en_US"}\n'
        '{"id": "q3", "text": "¿Cómo modifico las órdenes de venta?", "language": "es_CO"}\n'
        '{"id": "q4", "text": "a question nobody labelled"}\n',
        encoding="utf-8",
    )
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text(
        "query_id\tsource_type\tsource_id\tgrade\n"
        f"q1\tfiles\t{WAREHOUSE.source_id}\t2\n"
        # Labels may name a files document by a suffix of its path.
        "q2\tfiles\tpartners.md\t2\n"
        f"q3\tfiles\t{ORDERS_ES.source_id}\t2\n"
        "q3\tfiles\tnot/indexed.md\t1\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        rag, ["eval", "--queries", str(queries), "--qrels", str(qrels), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    per_query = {q["id"]: q for q in report["queries"]}
    assert set(per_query) == {"q1", "q2", "q3"}
    for ident in ("q1", "q2"):
        assert per_query[ident]["ndcg@10"] == pytest.approx(1.0)
        assert per_query[ident]["mrr@10"] == pytest.approx(1.0)
    # q3: the Spanish window first (gain 2); the other label is not in the index: it is
    # reported and left out of the scores, not counted as a miss.
    assert per_query["q3"]["mrr@10"] == pytest.approx(1.0)
    assert per_query["q3"]["recall@10"] == pytest.approx(1.0)
    assert per_query["q3"]["ndcg@10"] == pytest.approx(1.0)
    assert report["unknown_documents"] == [f"{tmp_path.name}/q3: files:not/indexed.md"]
    assert report["by_language"]["en_US"]["ndcg@10"] == pytest.approx(1.0)
    assert report["overall"]["recall@10"] == pytest.approx(1.0)

    text = CliRunner().invoke(
        rag, ["eval", "--queries", str(queries), "--qrels", str(qrels), "--mode", "keyword"]
    )
    assert text.exit_code == 0, text.output
    assert "ndcg@10" in text.output
    assert "3 labelled queries" in text.output
    assert "1 labelled documents are not in the index" in text.output


def test_eval_rejects_a_broken_qrels_file(rag: click.Group, tmp_path: Path) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"id": "q1", "text": "locator"}\n')
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("q1 files kb/warehouse.md 2\n")
    result = CliRunner().invoke(rag, ["eval", "--queries", str(queries), "--qrels", str(qrels)])
    assert result.exit_code == 1
    assert "qrels.tsv:1" in result.output


def test_eval_reads_a_one_file_set(rag: click.Group, tmp_path: Path) -> None:
    labelled = tmp_path / "mine.jsonl"
    lines = [
        {"id": "q1", "question": "M_Locator", "language": "en_US",
         "relevant": [{"source_type": "files", "source_id": WAREHOUSE.source_id, "grade": 2}]},
        {"id": "q2", "question": "C_BPartner_ID", "language": "en_US",
         "relevant": [{"source_type": "files", "source_id": "partners.md"},
                      {"source_type": "wiki", "source_id": "999", "grade": 2}]},
        {"id": "q3", "question": "a page nobody ingested", "language": "en_US",
         "relevant": [{"source_type": "wiki", "source_id": "998", "grade": 1}]},
    ]  # fmt: skip
    labelled.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    result = CliRunner().invoke(rag, ["eval", "--set", str(labelled), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert {q["id"]: q["ndcg@10"] for q in report["queries"]} == {"q1": 1.0, "q2": 1.0}
    assert report["unknown_documents"] == ["mine/q2: wiki:999", "mine/q3: wiki:998"]
    assert report["unscored"] == ["mine/q3"]


def test_eval_names_the_file_and_line_of_a_malformed_set(rag: click.Group, tmp_path: Path) -> None:
    labelled = tmp_path / "broken.jsonl"
    labelled.write_text(
        '{"id": "q1", "question": "x", "relevant": [{"source_type": "files", "source_id": "a"}]}\n'
        '{"id": "q2", "question": "y", "relevant": [{"source_type": "files"}]}\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(rag, ["eval", "--set", str(labelled)])
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert line == (
        f'Error: {labelled}:2: each relevant document needs "source_type" and "source_id"'
    )


def test_rag_help_lists_search_and_eval() -> None:
    from rag_pipeline.cli import main

    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0, result.output
    assert "search" in result.output
    assert "eval" in result.output


def test_an_unreachable_database_is_one_line(
    monkeypatch: pytest.MonkeyPatch, rag_home: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("RAG_HOME", str(rag_home))
    # A socket folder with no server in it: the connection is refused at once.
    monkeypatch.setenv("RAG_VECTORDB_URL", f"postgresql://postgres@/rag?host={tmp_path}")

    @click.group()
    def group() -> None:
        """rag (search commands only)."""

    register(group)
    result = CliRunner().invoke(group, ["search", "locator"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: the vector database cannot be reached")
    assert "Traceback" not in result.output


def test_explain_prints_the_prepared_query_and_every_ranking_constant(rag: click.Group) -> None:
    result = CliRunner().invoke(rag, ["search", "comission for the supplier", "--explain"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.startswith("language") and "en" in line for line in lines)
    assert any(line.startswith("vocabulary adds") and "business partner" in line for line in lines)
    from rag_pipeline.settings.ranking import Ranking

    for name, value, _ in Ranking().describe():
        assert any(line.split()[:2] == [name, str(value)] for line in lines), name
