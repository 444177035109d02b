"""The code base stays ruff-clean and type-clean: both are part of the test suite, so CI
enforces them."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CODE = ["rag_pipeline", "rag_pipeline_tests", "benchmarks"]


def test_ruff_check_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", *CODE],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", *CODE],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_pyright_is_clean() -> None:
    # Strict on core/ and search/, standard elsewhere (pyrightconfig.json); the interpreter
    # running the tests is the environment whose packages it resolves.
    result = subprocess.run(
        [sys.executable, "-m", "basedpyright", "--pythonpath", sys.executable],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
