"""Verify a blind labelled set folder (queries.jsonl + qrels.tsv) against its writing rules.

Stdlib only. Run from anywhere: ``python3 benchmarks/eval/check_set.py benchmarks/eval/tenth_set``.
Ids are the set's letter and 001..060 (the letter of its first query), 36 English and 24
Spanish questions (the cross-language twenty_first_set: 60 Spanish). Exits with status 1 and
lists the problems when a rule is broken.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

FIXTURES = (Path(__file__).resolve().parent / "../../../shared/fixtures").resolve()
AD_DIRS = ("ad/core_es_CO", "ad/from_migrations")
WIKI_DIR = FIXTURES / "wiki" / "docs_md"

EXPECTED_QUERIES = 60
EXPECTED_LANGS = {"en_US": 36, "es_CO": 24}
# Sets written to a different language mix, by folder name.
LANGS_BY_FOLDER = {"twenty_first_set": {"es_CO": 60}}
HEADER = ["query_id", "source_type", "source_id", "grade"]
MAX_GRADE2_PER_ITEM = 2
AD_ID_RE = re.compile(r"^(AD_Window|AD_Process):(\d+)$")


def numeric_ids(kind: str) -> set[str]:
    """Numeric AD_Window_ID / AD_Process_ID values present in the fixture CSVs."""
    file_name = "ad_window.csv" if kind == "AD_Window" else "ad_process.csv"
    column = f"{kind}_ID".lower()
    ids: set[str] = set()
    for sub in AD_DIRS:
        path = FIXTURES / sub / file_name
        if not path.exists():
            continue
        with path.open(encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle):
                lowered = {k.lower(): (v or "") for k, v in row.items() if k}
                value = lowered.get(column, "").strip()
                if value.isdigit():
                    ids.add(value)
    return ids


def load_queries(path: Path, errors: list[str]) -> list[dict[str, str]]:
    queries: list[dict[str, str]] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                errors.append(f"queries.jsonl line {number}: empty line")
                continue
            obj = json.loads(line)
            if set(obj) != {"id", "text", "language"}:
                errors.append(f"queries.jsonl line {number}: keys {sorted(obj)}")
            queries.append(obj)
    return queries


def check_queries(
    queries: list[dict[str, str]], errors: list[str], expected_langs: dict[str, int]
) -> None:
    ids = [q.get("id", "") for q in queries]
    letter = ids[0][:1] if ids else ""
    expected_ids = [f"{letter}{n:03d}" for n in range(1, EXPECTED_QUERIES + 1)]
    if ids != expected_ids:
        errors.append(f"query ids are not {letter}001..{letter}060 contiguous and in order")
    langs = Counter(q.get("language", "") for q in queries)
    if dict(langs) != expected_langs:
        errors.append(f"language counts {dict(langs)} != {expected_langs}")
    texts = Counter(q.get("text", "").strip().lower() for q in queries)
    for text, count in texts.items():
        if not text:
            errors.append("empty query text")
        elif count > 1:
            errors.append(f"duplicate query text: {text!r}")


def load_qrels(path: Path, errors: list[str]) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t"))
    if not rows or rows[0] != HEADER:
        errors.append(f"qrels header {rows[0] if rows else None} != {HEADER}")
        return []
    body = rows[1:]
    for number, row in enumerate(body, 2):
        if len(row) != len(HEADER):
            errors.append(f"qrels.tsv line {number}: {len(row)} columns")
    return [row for row in body if len(row) == len(HEADER)]


def check_qrels(rows: list[list[str]], query_ids: set[str], errors: list[str]) -> None:
    valid = {"AD_Window": numeric_ids("AD_Window"), "AD_Process": numeric_ids("AD_Process")}
    wiki_files = {p.name for p in WIKI_DIR.glob("*.md")}
    first_grade: dict[str, str] = {}
    seen: set[tuple[str, str, str]] = set()
    grade2_items: Counter[tuple[str, str]] = Counter()
    for qid, source_type, source_id, grade in rows:
        if qid not in query_ids:
            errors.append(f"qrels: unknown query id {qid}")
        if grade not in {"1", "2"}:
            errors.append(f"qrels {qid}: grade {grade!r} not in {{1, 2}}")
        first_grade.setdefault(qid, grade)
        key = (qid, source_type, source_id)
        if key in seen:
            errors.append(f"qrels {qid}: duplicate label {source_type} {source_id}")
        seen.add(key)
        if grade == "2":
            grade2_items[(source_type, source_id)] += 1
        if source_type == "ad_metadata":
            match = AD_ID_RE.match(source_id)
            if not match:
                errors.append(f"qrels {qid}: malformed ad_metadata id {source_id}")
            elif match.group(2) not in valid[match.group(1)]:
                errors.append(f"qrels {qid}: {source_id} is not a numeric-ID fixture row")
        elif source_type == "files":
            if source_id not in wiki_files:
                errors.append(f"qrels {qid}: wiki file {source_id} not found")
        else:
            errors.append(f"qrels {qid}: unknown source_type {source_type}")
    for qid in sorted(query_ids):
        if qid not in first_grade:
            errors.append(f"query {qid} has no qrels")
        elif first_grade[qid] != "2":
            errors.append(f"query {qid}: first qrels line is not grade 2")
    for item, count in grade2_items.items():
        if count > MAX_GRADE2_PER_ITEM:
            errors.append(f"{item[0]} {item[1]} is grade 2 in {count} queries")
    grade2_queries = {row[0] for row in rows if row[3] == "2"}
    for qid in sorted(query_ids - grade2_queries):
        errors.append(f"query {qid} has no grade-2 label")


def kind_of(source_type: str, source_id: str) -> str:
    if source_type == "files":
        return "wiki"
    return "window" if source_id.startswith("AD_Window:") else "process"


def report(queries: list[dict[str, str]], rows: list[list[str]]) -> None:
    lang_of = {q["id"]: q["language"] for q in queries}
    per_query: dict[str, list[list[str]]] = defaultdict(list)
    for row in rows:
        per_query[row[0]].append(row)
    grades = Counter(row[3] for row in rows)
    types = Counter(row[1] for row in rows)
    sizes = Counter(len(v) for v in per_query.values())
    distinct = {(row[1], row[2]) for row in rows}
    main = Counter(kind_of(v[0][1], v[0][2]) for v in per_query.values())
    main_lang = Counter((lang_of[q], kind_of(v[0][1], v[0][2])) for q, v in per_query.items())
    print(f"queries: {len(queries)} {dict(Counter(lang_of.values()))}")
    print(
        f"qrels lines: {len(rows)} (grade 2: {grades['2']}, grade 1: {grades['1']}), "
        f"average {len(rows) / max(len(per_query), 1):.2f} per query"
    )
    print(f"labels per query: {dict(sorted(sizes.items()))}")
    print(f"source types: {dict(types)}; distinct labelled items: {len(distinct)}")
    print(f"main answer: {dict(main)}")
    print(f"main answer x language: {dict(sorted(main_lang.items()))}")


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: check_set.py SET_FOLDER")
        return 2
    folder = Path(sys.argv[1])
    errors: list[str] = []
    if not FIXTURES.is_dir():
        print(f"fixtures not found at {FIXTURES}")
        return 1
    queries = load_queries(folder / "queries.jsonl", errors)
    check_queries(queries, errors, LANGS_BY_FOLDER.get(folder.resolve().name, EXPECTED_LANGS))
    rows = load_qrels(folder / "qrels.tsv", errors)
    check_qrels(rows, {q.get("id", "") for q in queries}, errors)
    report(queries, rows)
    if errors:
        print(f"FAIL: {len(errors)} problem(s)")
        for error in errors:
            print(f"  - {error}")
        return 1
    print("OK: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
