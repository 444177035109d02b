"""`rag_pipeline/search/` stays small: retrieval only, within a line budget, short functions.

Answers (`answer/`), the agent server (`mcp/`), the metrics (`evaluation/`) and what sources
declare (`core/`, `sources/`) live elsewhere; this keeps it so. The budget leaves room for
the cross-language query code still to come (issue 44: at most 2,600 lines with it).
"""

import ast
from pathlib import Path

import pytest

import rag_pipeline.search as search

pytestmark = pytest.mark.unit

SEARCH = Path(search.__file__).parent
LINE_BUDGET = 2_600
LONGEST_FUNCTION = 60


def _modules() -> list[Path]:
    return sorted(SEARCH.rglob("*.py"))


def test_search_is_within_its_line_budget() -> None:
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in _modules())
    assert 0 < lines <= LINE_BUDGET, f"rag_pipeline/search/ holds {lines} lines of Python"


def test_no_function_of_search_is_longer_than_60_lines() -> None:
    long: list[str] = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > LONGEST_FUNCTION:
                    long.append(f"{path.relative_to(SEARCH)}:{node.lineno} {node.name} ({length})")
    assert long == []


def test_the_line_count_reads_every_module() -> None:
    names = {path.relative_to(SEARCH).as_posix() for path in _modules()}
    assert {"engine.py", "queries.py", "vocabulary/__init__.py"} <= names
