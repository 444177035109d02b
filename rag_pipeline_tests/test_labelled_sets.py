"""The labelled sets shipped under benchmarks/eval: readable, complete, and naming real items."""

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rag_pipeline.sources.idempiere.vocabulary as vocabulary_package
from rag_pipeline.core.words import fold, function_words
from rag_pipeline.evaluation.metrics import load_qrels, load_queries

EVAL = Path(__file__).resolve().parents[1] / "benchmarks" / "eval"
VOCABULARY = Path(vocabulary_package.__file__).parent
# The helper-written sets, in the order they were written, with their Spanish question counts.
BLIND_SETS = {
    "second": 25,
    "third": 20,
    "fourth": 20,
    "fifth": 30,
    "sixth": 25,
    "seventh": 24,
    "eighth": 24,
    "ninth": 24,
    "tenth": 24,
    "eleventh": 24,
    "twelfth": 24,
    "thirteenth": 24,
    "fourteenth": 24,
    "fifteenth": 24,
    "sixteenth": 24,
    "seventeenth": 24,
    "eighteenth": 24,
    "nineteenth": 24,
    "twentieth": 24,
    # Spanish only: 40 questions answered by English wiki pages, 20 by dictionary items.
    "twenty_first": 60,
}
# From the ninth on, each set was written to the rules benchmarks/eval/check_set.py checks.
CHECKED_SETS = list(BLIND_SETS)[list(BLIND_SETS).index("ninth") :]
SETS = {"first": (EVAL / "queries.jsonl", EVAL / "qrels.tsv")} | {
    name: (EVAL / f"{name}_set" / "queries.jsonl", EVAL / f"{name}_set" / "qrels.tsv")
    for name in BLIND_SETS
}


@pytest.mark.parametrize(("queries_path", "qrels_path"), SETS.values(), ids=SETS.keys())
def test_every_query_has_a_relevant_item_and_every_label_a_query(
    queries_path: Path, qrels_path: Path
) -> None:
    queries = load_queries(queries_path)
    qrels = load_qrels(qrels_path)
    ids = [q.id for q in queries]
    assert len(ids) == len(set(ids))
    assert set(qrels) == set(ids)
    assert all(max(labels.values()) == 2 for labels in qrels.values())
    assert {q.language for q in queries} <= {"en_US", "es_CO"}


@pytest.mark.parametrize(
    ("folder", "spanish"),
    [(f"{name}_set", spanish) for name, spanish in BLIND_SETS.items()],
    ids=BLIND_SETS.keys(),
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
    [f"{name}_set" for name in CHECKED_SETS],
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


# Frozen as held-out (benchmarks/eval/results.py marks them so in the results files): never
# read for tuning, and never quoted by the search vocabulary.
HELD_OUT = ("eighteenth", "nineteenth", "twentieth", "twenty_first")


def _folded_words(text: str) -> list[str]:
    return re.findall(r"[\w']+", fold(text))


@pytest.mark.parametrize("language", ["en", "es"])
def test_no_vocabulary_phrase_of_three_words_quotes_a_held_out_question(language: str) -> None:
    from benchmarks.eval.results import HELD_OUT as MARKED

    assert MARKED == HELD_OUT
    questions = [
        " " + " ".join(_folded_words(query.text)) + " "
        for name in HELD_OUT
        for query in load_queries(EVAL / f"{name}_set" / "queries.jsonl")
    ]
    skip = function_words(language)
    quoted: list[str] = []
    for line in (VOCABULARY / f"{language}.tsv").read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or "\t" not in line:
            continue
        for phrase in line.split("\t", 1)[0].split("|"):
            words = _folded_words(phrase)
            # Three words or more besides function words ("factura de venta" is two).
            if len([w for w in words if w not in skip]) >= 3 and any(
                f" {' '.join(words)} " in question for question in questions
            ):
                quoted.append(phrase)
    assert quoted == []
    assert len(questions) == 240
