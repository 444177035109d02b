"""The code base stays ruff-clean: lint is part of the test suite, so CI enforces it."""

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
