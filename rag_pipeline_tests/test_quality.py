"""The code base stays ruff-clean: lint is part of the test suite, so CI enforces it."""

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_ruff_check_is_clean() -> None:
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install '.[test]')")
    result = subprocess.run(
        [ruff, "check", "rag_pipeline", "rag_pipeline_tests", "benchmarks"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
