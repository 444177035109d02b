"""The labelled sets shipped under benchmarks/eval: readable, complete, and naming real items."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rag_pipeline.search.evaluation import load_qrels, load_queries

EVAL = Path(__file__).resolve().parents[1] / "benchmarks" / "eval"
SETS = [
    (EVAL / "queries.jsonl", EVAL / "qrels.tsv"),
    (EVAL / "second_set" / "queries.jsonl", EVAL / "second_set" / "qrels.tsv"),
    (EVAL / "third_set" / "queries.jsonl", EVAL / "third_set" / "qrels.tsv"),
    (EVAL / "fourth_set" / "queries.jsonl", EVAL / "fourth_set" / "qrels.tsv"),
    (EVAL / "fifth_set" / "queries.jsonl", EVAL / "fifth_set" / "qrels.tsv"),
    (EVAL / "sixth_set" / "queries.jsonl", EVAL / "sixth_set" / "qrels.tsv"),
    (EVAL / "seventh_set" / "queries.jsonl", EVAL / "seventh_set" / "qrels.tsv"),
    (EVAL / "eighth_set" / "queries.jsonl", EVAL / "eighth_set" / "qrels.tsv"),
    (EVAL / "ninth_set" / "queries.jsonl", EVAL / "ninth_set" / "qrels.tsv"),
    (EVAL / "tenth_set" / "queries.jsonl", EVAL / "tenth_set" / "qrels.tsv"),
    (EVAL / "eleventh_set" / "queries.jsonl", EVAL / "eleventh_set" / "qrels.tsv"),
    (EVAL / "twelfth_set" / "queries.jsonl", EVAL / "twelfth_set" / "qrels.tsv"),
    (EVAL / "thirteenth_set" / "queries.jsonl", EVAL / "thirteenth_set" / "qrels.tsv"),
    (EVAL / "fourteenth_set" / "queries.jsonl", EVAL / "fourteenth_set" / "qrels.tsv"),
    (EVAL / "fifteenth_set" / "queries.jsonl", EVAL / "fifteenth_set" / "qrels.tsv"),
    (EVAL / "sixteenth_set" / "queries.jsonl", EVAL / "sixteenth_set" / "qrels.tsv"),
]


@pytest.mark.parametrize(
    ("queries_path", "qrels_path"),
    SETS,
    ids=[
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "sixth",
        "seventh",
        "eighth",
        "ninth",
        "tenth",
        "eleventh",
        "twelfth",
        "thirteenth",
        "fourteenth",
        "fifteenth",
        "sixteenth",
    ],
)
def test_every_query_has_a_relevant_item_and_every_label_a_query(
    queries_path: Path, qrels_path: Path
) -> None:
    queries = load_queries(queries_path)
    qrels = load_qrels(qrels_path)
    ids = [q.id for q in queries]
    assert len(ids) == len(set(ids))
    assert set(qrels) == set(ids)
    assert all(max(labels.values()) == 2 for labels in qrels.values())
    assert {q.language for q in queries} == {"en_US", "es_CO"}


@pytest.mark.parametrize(
    ("folder", "spanish"),
    [
        ("second_set", 25),
        ("third_set", 20),
        ("fourth_set", 20),
        ("fifth_set", 30),
        ("sixth_set", 25),
        ("seventh_set", 24),
        ("eighth_set", 24),
        ("ninth_set", 24),
        ("tenth_set", 24),
        ("eleventh_set", 24),
        ("twelfth_set", 24),
        ("thirteenth_set", 24),
        ("fourteenth_set", 24),
        ("fifteenth_set", 24),
        ("sixteenth_set", 24),
    ],
)
def test_the_blind_sets_name_items_of_the_fixtures(
    shared_fixtures: Path, folder: str, spanish: int
) -> None:
    known: dict[str, set[str]] = {"AD_Window": set(), "AD_Process": set()}
    for entity in ("window", "process"):
        for export in ("core_es_CO", "from_migrations"):
            with (shared_fixtures / "ad" / export / f"ad_{entity}.csv").open() as handle:
                for row in csv.DictReader(handle):
                    ident = row.get(f"AD_{entity.capitalize()}_ID") or row.get(f"ad_{entity}_id")
                    if ident:
                        known[f"AD_{entity.capitalize()}"].add(ident)
    pages = {p.name for p in (shared_fixtures / "wiki" / "docs_md").glob("*.md")}
    unknown = []
    qrels = load_qrels(EVAL / folder / "qrels.tsv")
    for query_id, labels in qrels.items():
        for source_type, source_id in labels:
            if source_type == "ad_metadata":
                kind, _, ident = source_id.partition(":")
                found = ident in known.get(kind, set())
            else:
                found = source_type == "files" and source_id in pages
            if not found:
                unknown.append((query_id, source_type, source_id))
    assert unknown == []
    lines = (EVAL / folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["language"] for line in lines].count("es_CO") == spanish


@pytest.mark.usefixtures("shared_fixtures")
@pytest.mark.parametrize(
    "folder",
    [
        "ninth_set",
        "tenth_set",
        "eleventh_set",
        "twelfth_set",
        "thirteenth_set",
        "fourteenth_set",
        "fifteenth_set",
        "sixteenth_set",
    ],
)
def test_the_sets_written_to_rules_keep_them(folder: str) -> None:
    # benchmarks/eval/check_set.py: contiguous ids, a grade-2 first label, no item the main
    # answer of more than two questions, every label a fixture row or page.
    script = EVAL / "check_set.py"
    done = subprocess.run(
        [sys.executable, str(script), str(EVAL / folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout
    assert done.stdout.rstrip().endswith("OK: all checks passed")
