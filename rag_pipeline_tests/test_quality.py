"""The code base stays ruff-clean and type-clean: both are part of the test suite, so CI
enforces them."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CODE = ["rag_pipeline", "rag_pipeline_tests", "benchmarks"]


def _run_module(*args: str) -> None:
    # Through the interpreter running the tests: the tool is the one installed beside it.
    result = subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_check_is_clean() -> None:
    _run_module("ruff", "check", *CODE)


def test_ruff_format_is_clean() -> None:
    _run_module("ruff", "format", "--check", *CODE)


def test_pyright_is_clean() -> None:
    # Strict on core/ and search/, standard elsewhere (pyrightconfig.json); the interpreter
    # running the tests is the environment whose packages it resolves.
    _run_module("basedpyright", "--pythonpath", sys.executable)
